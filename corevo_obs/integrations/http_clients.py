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

aiohttp (request start -> end or exception)::

    session = aiohttp.ClientSession(trace_configs=[aiohttp_trace_config()])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..stages import ExternalWait, current_stages

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


class CorevoTransport:
    """An httpx transport wrapper that also times calls ending in an error.

    ``httpx.AsyncClient(transport=CorevoTransport(httpx.AsyncHTTPTransport()))``; works
    for sync transports too (``handle_request``).
    """

    def __init__(self, inner: Any, dependency: Dependency = None) -> None:
        self._inner = inner
        self._dependency = dependency

    async def handle_async_request(self, request: Any) -> Any:
        wait = _begin(self._dependency, request.url)
        try:
            response = await self._inner.handle_async_request(request)
        except BaseException as exc:
            _end(wait, exc)
            raise
        _end(wait)
        return response

    def handle_request(self, request: Any) -> Any:
        wait = _begin(self._dependency, request.url)
        try:
            response = self._inner.handle_request(request)
        except BaseException as exc:
            _end(wait, exc)
            raise
        _end(wait)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()

    def close(self) -> None:
        self._inner.close()
