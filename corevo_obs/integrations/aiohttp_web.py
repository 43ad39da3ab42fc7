"""aiohttp.web: the four stages of every request, streamed response and WebSocket.

aiohttp sends a plain ``Response`` after the middleware chain has returned, and a
streamed one while the handler runs, so marks cannot come from the middleware's return
alone (that is how an ``on_response_prepare`` hook ends up marking after the end). Here:

- the middleware starts the task (kind = the resource's canonical template, e.g.
  ``GET /items/{id}``; unmatched requests, 405s and methods outside the standard set are
  one kind; ``/metrics`` excluded) and keeps
  it current, so handlers and the client hooks in ``http_clients`` reach it;
- an ``on_response_prepare`` hook arms the response: the first ``write`` of a
  ``StreamResponse`` and the first ``send_*`` of a ``WebSocketResponse`` mark the first
  event (the wrappers are removed after that first call, so later writes cost nothing);
- a plain response is sent by the middleware itself (``prepare`` + ``write_eof``, which
  aiohttp treats as already done), so its first event and total are the real send. A
  response class whose own ``prepare`` sends (``FileResponse``, ``add_static``) is told
  it has been sent, so aiohttp's second ``prepare`` does not send it again;
- a client gone mid-response (``ConnectionError``) is ``cancelled``, as on ASGI.

Example::

    app = web.Application()
    install_stages(app)          # first in app.middlewares, so it sees what the client sees
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Any, Final

from prometheus_client import CollectorRegistry

from ..core.telemetry import Telemetry
from ..stages import StageRecorder, TaskStages, one_recorder, outcome_of
from .asgi import DEFAULT_EXCLUDE, DEFAULT_MAX_KINDS
from .request_start import DEFAULT_MAX_AGE, HEADER, parse_request_start
from .routes import STANDARD_METHODS, UNMATCHED

__all__ = [
    "install_stages",
    "stages_middleware",
]


_KEY: Final = "corevo.stages"
_WS_SENDS: Final = ("send_str", "send_bytes", "send_frame")


def install_stages(
    app: Any,
    *,
    recorder: StageRecorder | None = None,
    worker: str | None = None,
    registry: CollectorRegistry | None = None,
    exclude: Collection[str] = DEFAULT_EXCLUDE,
    kind_format: str = "{method} {route}",
    request_start_header: str | None = HEADER,
    max_request_start_age: float = DEFAULT_MAX_AGE,
) -> StageRecorder:
    """Install the middleware (first) and the prepare hook on ``app``; the recorder.

    A bad ``$COREVO_WORKER`` is counted and logged once and ``pid<N>`` is used: a worker's
    app factory must not fail on the instrumentation's environment.
    """
    one_recorder(recorder, worker, registry, source="install_stages")
    if recorder is not None:
        rec = recorder
    else:
        resolved = Telemetry.resolve_on_use("stages", worker, registry)
        rec = StageRecorder(worker=resolved.worker, registry=resolved.registry,
                            max_kinds=DEFAULT_MAX_KINDS)
    app.middlewares.insert(0, stages_middleware(
        rec, exclude=exclude, kind_format=kind_format,
        request_start_header=request_start_header, max_request_start_age=max_request_start_age,
    ))
    app.on_response_prepare.append(_arm_response)
    return rec


def stages_middleware(
    recorder: StageRecorder,
    *,
    exclude: Collection[str] = DEFAULT_EXCLUDE,
    kind_format: str = "{method} {route}",
    request_start_header: str | None = HEADER,
    max_request_start_age: float = DEFAULT_MAX_AGE,
) -> Callable[[Any, Callable[[Any], Awaitable[Any]]], Awaitable[Any]]:
    """The middleware alone (``install_stages`` also installs the hook it needs)."""
    from aiohttp import web

    excluded = frozenset(exclude)

    @web.middleware
    async def corevo_stages(request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        route = _template(request)
        if route in excluded or request.path in excluded:
            return await handler(request)
        websocket = request.headers.get("Upgrade", "").lower() == "websocket"
        method = "WS" if websocket else request.method
        kind = (UNMATCHED if route is None or not (websocket or method in STANDARD_METHODS)
                else kind_format.format(method=method, route=route))
        accepted = None
        if request_start_header is not None:
            accepted = parse_request_start(request.headers.get(request_start_header),
                                           max_age=max_request_start_age)
        stages = recorder.task(kind, accepted_at=accepted)
        stages.started()
        request[_KEY] = stages
        with stages.activate():
            try:
                response = await handler(request)
            except web.HTTPException as exc:  # sent by aiohttp after this returns
                stages.first_event()
                stages.finish("failed" if exc.status >= 500 else "completed")
                raise
            except BaseException as exc:
                stages.finish(_outcome(exc))
                raise
        await _send(request, response, stages, web)
        return response

    return corevo_stages


async def _send(request: Any, response: Any, stages: TaskStages, web: Any) -> None:
    """Finish the response now, so total (and a plain body's first event) is the send."""
    if isinstance(response, web.WebSocketResponse):
        code = response.close_code
        stages.finish("completed" if code in (None, 1000, 1001) else "cancelled")
        return
    try:
        if not response.prepared:
            await response.prepare(request)
            if type(response).prepare is not web.StreamResponse.prepare:
                response.prepare = _sent  # aiohttp prepares it again after the middleware
        await response.write_eof()
    except BaseException as exc:
        stages.finish(_outcome(exc))
        raise
    if not _first_done(response):
        stages.first_event()
    stages.finish("failed" if response.status >= 500 else "completed")


async def _sent(request: Any) -> None:
    """``prepare`` of a response the middleware has sent: nothing left to send."""
    return None


def _outcome(exc: BaseException) -> str:
    """A client gone mid-response is ``cancelled`` (the ASGI middleware sees it as a
    disconnect); otherwise what the exception implies."""
    return "cancelled" if isinstance(exc, ConnectionError) else outcome_of(exc)


def _template(request: Any) -> str | None:
    info = request.match_info
    route = getattr(info, "route", None)
    resource = getattr(route, "resource", None)
    if resource is None:
        return None
    canonical = getattr(resource, "canonical", None)
    return canonical if isinstance(canonical, str) else None


async def _arm_response(request: Any, response: Any) -> None:
    """Wrap the response's first body write (or first WebSocket send) to mark it."""
    stages = request.get(_KEY)
    if stages is None or stages.finished:
        return
    from aiohttp import web

    names = _WS_SENDS if isinstance(response, web.WebSocketResponse) else ("write",)
    if isinstance(response, web.Response) and not isinstance(response, web.WebSocketResponse):
        return  # a plain body goes out in write_eof, which the middleware times
    for name in names:
        _wrap_once(response, name, stages, names)


def _wrap_once(response: Any, name: str, stages: TaskStages, group: tuple[str, ...]) -> None:
    original = getattr(response, name)

    async def first(*args: Any, **kwargs: Any) -> Any:
        for other in group:  # one mark: back to the class's methods for every later call
            response.__dict__.pop(other, None)
        result = await original(*args, **kwargs)
        stages.first_event()
        response.__dict__["_corevo_first"] = True
        return result

    setattr(response, name, first)


def _first_done(response: Any) -> bool:
    return bool(response.__dict__.get("_corevo_first"))
