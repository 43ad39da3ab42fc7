"""When a front proxy accepted the request: the ``X-Request-Start`` header.

Dispatch (accepted -> handler runs) includes the time a request spent queued in front of
the worker only when something outside the worker stamped the accept time. nginx
(``proxy_set_header X-Request-Start "t=${msec}";``: seconds with a fraction), Heroku's
router (milliseconds) and other proxies (``t=`` microseconds) send it in these forms;
the unit is told apart by magnitude. The header is client-settable where no proxy
overwrites it, so a value older than ``max_age`` or in the future is ignored (then the
server's receive time is used): a forged header can shift one sample, not poison the
histogram with hours.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Final

__all__ = [
    "HEADER",
    "parse_request_start",
]

HEADER: Final = "x-request-start"
DEFAULT_MAX_AGE: Final = 600.0
_FUTURE_SLACK: Final = 5.0  # proxy and worker clocks may differ a little


def parse_request_start(
    raw: str | bytes | None,
    *,
    max_age: float = DEFAULT_MAX_AGE,
    clock: Callable[[], float] = time.time,
) -> float | None:
    """Wall-clock seconds from a request-start header value, or None if absent or bogus.

    >>> parse_request_start("t=1700000000.250", clock=lambda: 1700000001.0)
    1700000000.25
    >>> parse_request_start("1700000000250", clock=lambda: 1700000001.0)   # ms
    1700000000.25
    >>> parse_request_start("t=1700000000250000", clock=lambda: 1700000001.0)   # µs
    1700000000.25
    >>> parse_request_start("t=12", clock=lambda: 1700000001.0) is None   # too old
    True
    """
    if raw is None:
        return None
    try:
        text = raw.decode("latin-1") if isinstance(raw, bytes) else raw
        text = text.strip()
        if text.startswith("t="):
            text = text[2:]
        value = float(text)
    except (ValueError, UnicodeDecodeError):
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    if value > 1e17:
        value /= 1e9  # nanoseconds
    elif value > 1e14:
        value /= 1e6  # microseconds
    elif value > 1e11:
        value /= 1e3  # milliseconds
    now = clock()
    if value > now + _FUTURE_SLACK or now - value > max_age:
        return None
    return min(value, now)
