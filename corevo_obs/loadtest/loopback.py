"""The tool talks to this machine only: loopback URLs, and no redirect or proxy away.

A URL given on the command line is checked once (``check_loopback``), but an app may
answer ``302 Location: http://elsewhere/``. So every connection the tool opens is checked:
the driver's aiohttp sessions carry ``loopback_only`` (a client middleware: it runs before
each connect, redirect hops and WebSocket handshakes included) and raise ``OffLoopback``
instead of connecting, which the driver counts as ``redirect_refused``; the scrapes use
``urlopen`` here, which follows no redirect off loopback. Neither uses ``$http_proxy``.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable
from typing import IO, Any

from ..core.errors import CorevoObsError
from .workload import WorkloadError

__all__ = [
    "OffLoopback",
    "check_loopback",
    "loopback_only",
    "is_loopback_url",
    "urlopen",
]


class OffLoopback(CorevoObsError):
    """A request (a redirect hop) was about to leave loopback and was not sent."""


async def loopback_only(request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
    """aiohttp client middleware: connect only to loopback, whatever sent us there."""
    if not is_loopback_url(str(request.url)):
        raise OffLoopback(f"refused to follow to {request.url.host!r}: not loopback")
    return await handler(request)


def _loopback_host(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_loopback_url(url: str) -> bool:
    """True for an http(s) URL on a loopback host, or a relative one (same host)."""
    parts = urllib.parse.urlsplit(url)
    if not parts.scheme and not parts.netloc:
        return True
    return parts.scheme in ("http", "https", "ws", "wss") and _loopback_host(
        parts.hostname or "")


def check_loopback(url: str, what: str) -> str:
    """The URL without a trailing slash; anything but a loopback host is refused."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WorkloadError(f"not an http(s) URL: {url!r}", source=what)
    if not _loopback_host(parts.hostname):
        raise WorkloadError(f"refusing non-loopback host {parts.hostname!r}: the load test "
                            "only drives apps on this machine (127.0.0.0/8, ::1, localhost)",
                            source=what)
    return url.rstrip("/")


class _LoopbackRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect within loopback (``/metrics`` -> ``/metrics/``); any other is
    the answer (an ``HTTPError``), never a request elsewhere."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any,
                         newurl: str) -> Any:
        if not is_loopback_url(newurl):
            return None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}), _LoopbackRedirects())


def urlopen(url: str, timeout: float) -> IO[bytes]:
    """``urllib.request.urlopen`` that follows no redirect off loopback and no proxy."""
    return _OPENER.open(url, timeout=timeout)  # type: ignore[no-any-return]
