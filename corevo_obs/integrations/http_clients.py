"""Outgoing HTTP calls timed as the external stage of the current task.

A call made while a tracked task runs (inside the ASGI / aiohttp middleware, a
``@track_task`` handler, or ``stages.activate()``) is recorded in
``corevo_task_external_seconds`` under a bounded ``dependency``: by default the host
the call went to (the recorder caps how many distinct values it keeps), or a fixed name
or a function of the URL. A call outside a tracked task is not recorded.

httpx (the wait is request sent -> response headers received; a call that fails before
a response is recorded by ``CorevoTransport`` only)::

    client = httpx.AsyncClient(event_hooks=httpx_async_hooks(dependency="model"))
    client = httpx.Client(event_hooks=httpx_hooks())
    client = httpx.AsyncClient(transport=CorevoTransport(httpx.AsyncHTTPTransport()))

aiohttp (request start -> end or exception)::

    session = aiohttp.ClientSession(trace_configs=[aiohttp_trace_config()])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..stages import ExternalWait, current_stages

if TYPE_CHECKING:
    from .httpx_transport import CorevoTransport

__all__ = [
    "CorevoTransport",
    "aiohttp_trace_config",
    "httpx_async_hooks",
    "httpx_hooks",
]


Dependency = str | Callable[[Any], str] | None
_KEY = "corevo.external"


def _name(dependency: Dependency, url: Any) -> str:
    if dependency is None:
        host = getattr(url, "host", None)
        return host if isinstance(host, str) and host else "http"
    if isinstance(dependency, str):
        return dependency
    return dependency(url)


def _begin(dependency: Dependency, url: Any) -> ExternalWait | None:
    stages = current_stages()
    if stages is None:
        return None
    wait = stages.external(_name(dependency, url))
    wait.__enter__()
    return wait


def _end(wait: ExternalWait | None, exc: BaseException | None = None) -> None:
    if wait is not None:
        wait.__exit__(None if exc is None else type(exc), exc, None)


def httpx_hooks(dependency: Dependency = None) -> dict[str, list[Callable[[Any], None]]]:
    """``event_hooks`` for ``httpx.Client``."""

    def on_request(request: Any) -> None:
        request.extensions[_KEY] = _begin(dependency, request.url)

    def on_response(response: Any) -> None:
        _end(response.request.extensions.pop(_KEY, None))

    return {"request": [on_request], "response": [on_response]}


def httpx_async_hooks(dependency: Dependency = None) -> dict[str, list[Callable[[Any], Any]]]:
    """``event_hooks`` for ``httpx.AsyncClient`` (its hooks must be coroutines)."""

    async def on_request(request: Any) -> None:
        request.extensions[_KEY] = _begin(dependency, request.url)

    async def on_response(response: Any) -> None:
        _end(response.request.extensions.pop(_KEY, None))

    return {"request": [on_request], "response": [on_response]}


def aiohttp_trace_config(dependency: Dependency = None) -> Any:
    """An ``aiohttp.TraceConfig`` recording each client request of a tracked task."""
    import aiohttp

    async def on_start(session: Any, ctx: Any, params: Any) -> None:
        ctx.corevo_wait = _begin(dependency, params.url)

    async def on_end(session: Any, ctx: Any, params: Any) -> None:
        _end(getattr(ctx, "corevo_wait", None))

    async def on_exception(session: Any, ctx: Any, params: Any) -> None:
        _end(getattr(ctx, "corevo_wait", None), params.exception)

    config = aiohttp.TraceConfig()
    config.on_request_start.append(on_start)
    config.on_request_end.append(on_end)
    config.on_request_exception.append(on_exception)
    return config


def __getattr__(name: str) -> Any:
    """``CorevoTransport`` subclasses httpx's transports: httpx loads on first use only,
    so the aiohttp helpers above work where httpx is not installed."""
    if name == "CorevoTransport":
        from .httpx_transport import CorevoTransport

        globals()[name] = CorevoTransport
        return CorevoTransport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
