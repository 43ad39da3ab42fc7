"""``CorevoTransport``: an httpx transport that times every call, failures included.

A real transport (an ``httpx.AsyncBaseTransport`` and an ``httpx.BaseTransport``), so a
client treats it as it treats its own: ``async with httpx.AsyncClient(transport=...)``
opens and closes the wrapped transport through it. Imported by
``corevo_obs.integrations.http_clients`` on first use of the name, so httpx is needed
only by those who use it.
"""

from __future__ import annotations

from types import TracebackType

import httpx

from .http_clients import Dependency, _begin, _end

__all__ = ["CorevoTransport"]


class CorevoTransport(httpx.AsyncBaseTransport, httpx.BaseTransport):
    """Wraps a transport; each request of a tracked task is an external wait.

    Event hooks see only calls that got a response; this also records a call that failed
    before one (refused, timed out, cancelled). Wrap the transport you would have passed::

        async with httpx.AsyncClient(
                transport=CorevoTransport(httpx.AsyncHTTPTransport(retries=1))) as client:
            await client.get(url)

    A sync ``httpx.Client`` takes it around an ``httpx.HTTPTransport`` the same way.
    """

    def __init__(self, inner: httpx.AsyncBaseTransport | httpx.BaseTransport,
                 dependency: Dependency = None) -> None:
        self._inner = inner
        self._dependency = dependency

    def _async_inner(self) -> httpx.AsyncBaseTransport:
        if not isinstance(self._inner, httpx.AsyncBaseTransport):
            raise TypeError("CorevoTransport wraps a sync transport: use it with httpx.Client")
        return self._inner

    def _sync_inner(self) -> httpx.BaseTransport:
        if not isinstance(self._inner, httpx.BaseTransport):
            raise TypeError("CorevoTransport wraps an async transport: use httpx.AsyncClient")
        return self._inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        inner = self._async_inner()
        wait = _begin(self._dependency, request.url)
        try:
            response = await inner.handle_async_request(request)
        except BaseException as exc:
            _end(wait, exc)
            raise
        _end(wait)
        return response

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        inner = self._sync_inner()
        wait = _begin(self._dependency, request.url)
        try:
            response = inner.handle_request(request)
        except BaseException as exc:
            _end(wait, exc)
            raise
        _end(wait)
        return response

    async def __aenter__(self) -> CorevoTransport:
        await self._async_inner().__aenter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None = None,
                        exc_value: BaseException | None = None,
                        traceback: TracebackType | None = None) -> None:
        await self._async_inner().__aexit__(exc_type, exc_value, traceback)

    async def aclose(self) -> None:
        await self._async_inner().aclose()

    def __enter__(self) -> CorevoTransport:
        self._sync_inner().__enter__()
        return self

    def __exit__(self, exc_type: type[BaseException] | None = None,
                 exc_value: BaseException | None = None,
                 traceback: TracebackType | None = None) -> None:
        self._sync_inner().__exit__(exc_type, exc_value, traceback)

    def close(self) -> None:
        self._sync_inner().close()
