"""ASGI middleware: the four stages of every HTTP request and WebSocket, no handler code.

- **kind**: the route template (``GET /items/{item_id}``, ``WS /ws``), found without
  user code for Starlette/FastAPI, Litestar, Quart and any framework that leaves one in
  the scope (``routes``); paths no route serves, methods it refuses (405) and methods
  outside the standard set are one kind, ``unmatched``; excluded paths (``/metrics`` by
  default) are not tracked at all. Bounded by construction: never a raw path. An app
  whose router is unknown gets one warning naming ``route_of=``, and its requests are
  counted in ``corevo_task_unrouted_total{reason="no_router"}``.
- **dispatch**: accepted -> the middleware runs on the worker's loop. Accepted is the
  front proxy's ``X-Request-Start`` when present (see ``request_start``), otherwise the
  moment this middleware was called: without a proxy stamp, dispatch cannot see queueing
  in front of the worker.
- **first event**: the first non-empty response body chunk, or the first
  ``websocket.send``; for a response with an empty body, its final send.
- **total**: the final body send, the server's ``websocket.close`` or the client's
  disconnect, with the outcome (``completed``; ``failed`` for 5xx or an exception;
  ``cancelled`` when the client went away first).

Handlers reach their task through ``corevo_obs.current_stages()`` (e.g. to time a
model call with ``current_stages().external("model")``), and the HTTP client hooks in
``http_clients`` record outgoing calls against it.

Example (FastAPI / Starlette; Litestar, Quart and any ASGI app: wrap it)::

    app = FastAPI()
    app.add_middleware(StagesMiddleware)          # or StagesMiddleware(app) for any ASGI app
    app = StagesMiddleware(Litestar(route_handlers=[...]))
    quart_app.asgi_app = StagesMiddleware(quart_app.asgi_app)

Put it outermost among your middleware so it sees the response as the client does.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from typing import Any, Final

from prometheus_client import CollectorRegistry

from ..core import guard
from ..core.identity import worker_name
from ..core.telemetry import Telemetry
from ..stages import StageRecorder, TaskStages, one_recorder
from .request_start import DEFAULT_MAX_AGE, HEADER, parse_request_start
from .routes import STANDARD_METHODS, UNMATCHED, RouteCache, RouteOf, router_of, scope_template

__all__ = [
    "StagesMiddleware",
]


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
#: what the middleware wraps: any ASGI callable (frameworks type scopes as TypedDicts)
AnyASGIApp = Callable[..., Awaitable[None]]

log = logging.getLogger("corevo_obs.stages")
DEFAULT_EXCLUDE: Final = ("/metrics",)
UNROUTED_REASONS: Final = ("no_route", "no_router", "route_of_error")
_LOOK: Final[Any] = object()  # the router is looked for on the first request
DEFAULT_MAX_KINDS: Final = 128
_NORMAL_CLOSE: Final = (1000, 1001)


class StagesMiddleware:
    """Record dispatch / first event / external / total for each request of an ASGI app.

    ``exclude``: route templates or paths not to track; an entry ending in ``*`` is a
    path prefix (``/static/*``). ``route_of(scope)``: the route template for apps whose
    router is not found on its own (see ``routes``; return None for "no route"); one
    that raises is counted and the request is ``unmatched``. ``kind_format`` may use
    ``{method}`` and ``{route}``. ``request_start_header=None`` ignores proxy stamps (do
    that when no proxy in front overwrites the header).

    ``worker`` / ``registry`` are resolved in each process on its first request, so a
    pre-forked server's children get their own worker names (``$COREVO_WORKER``). A bad
    ``$COREVO_WORKER`` found then is counted and logged once and ``pid<N>`` is used; if
    the recorder cannot be built at all, requests are served untracked (counted): the
    middleware never fails a request of its own.
    """

    def __init__(
        self,
        app: AnyASGIApp,
        *,
        recorder: StageRecorder | None = None,
        worker: str | None = None,
        registry: CollectorRegistry | None = None,
        exclude: Collection[str] = DEFAULT_EXCLUDE,
        kind_format: str = "{method} {route}",
        group_unmatched: bool = True,
        route_of: Callable[[Scope], str | None] | None = None,
        request_start_header: str | None = HEADER,
        max_request_start_age: float = DEFAULT_MAX_AGE,
        max_kinds: int = DEFAULT_MAX_KINDS,
    ) -> None:
        one_recorder(recorder, worker, registry, source="StagesMiddleware")
        self.app = app
        self._given = recorder
        self._recorder: StageRecorder | None = recorder
        self._pid = os.getpid()
        self._worker, self._registry = worker, registry
        if worker is not None:
            worker_name(worker)  # the host's own argument: wrong at start, not per request
        self._max_kinds = max_kinds
        self._exact = frozenset(e for e in exclude if not e.endswith("*"))
        self._prefixes = tuple(e[:-1] for e in exclude if e.endswith("*"))
        self._format = kind_format
        self._group = group_unmatched
        self._route_of = route_of
        self._router: RouteOf | None = _LOOK
        self._unrouted: dict[str, Any] = {}
        self._header = None if request_start_header is None else (
            request_start_header.lower().encode("latin-1"))
        self._max_age = max_request_start_age
        self._cache = RouteCache()

    @property
    def recorder(self) -> StageRecorder:
        """This process's recorder, built on first use (after a fork, anew: the worker
        name of a pre-forked server's child is not the master's)."""
        rec = self._recorder
        if rec is None or (self._given is None and self._pid != os.getpid()):
            self._pid = os.getpid()
            resolved = Telemetry.resolve_on_use("stages", self._worker, self._registry)
            rec = self._recorder = StageRecorder(worker=resolved.worker,
                                                 registry=resolved.registry,
                                                 max_kinds=self._max_kinds)
            self._unrouted = {}
        if not self._unrouted:  # at 0 from the start: an alert's increase() sees the first
            self._unrouted = {r: resolved_child(rec, r) for r in UNROUTED_REASONS}
        return rec

    @property
    def worker(self) -> str:
        """This process's ``worker`` label: its recorder's (built on first use)."""
        return self.recorder.worker

    @property
    def registry(self) -> CollectorRegistry:
        """The registry its series go to: its recorder's."""
        return self.recorder.registry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind_of = scope["type"]
        if kind_of != "http" and kind_of != "websocket":
            await self.app(scope, receive, send)
            return
        kind = self._kind(scope)
        if kind is None:
            await self.app(scope, receive, send)
            return
        accepted = None
        if self._header is not None:
            for name, value in scope.get("headers", ()):
                if name == self._header:
                    accepted = parse_request_start(value, max_age=self._max_age)
                    break
        try:
            rec = self.recorder
        except Exception as exc:  # noqa: BLE001 - instrumentation must not fail the request
            guard.absorb("stages", exc, worker="unknown", registry=self._registry)
            await self.app(scope, receive, send)
            return
        stages = rec.task(kind, accepted_at=accepted, attributes=(
            None if rec.tracer is None else {"http.route": kind,
                                             "http.request.method": scope.get("method", "WS")}))
        stages.started()
        if kind_of == "http":
            await _HttpCall(stages).run(self.app, scope, receive, send)
        else:
            await _SocketCall(stages).run(self.app, scope, receive, send)

    def _kind(self, scope: Scope) -> str | None:
        """The bounded kind for this request, or None when it is excluded."""
        path = scope.get("path", "")
        method = scope.get("method", "WS") if scope["type"] == "http" else "WS"
        known = method == "WS" or method in STANDARD_METHODS
        key = (scope["type"], method if known else "", path)
        found = self._cache.get(key)
        if found is not None:
            kind, unrouted = found
        else:
            route, unrouted = self._route(scope) if known else (None, "no_route")
            if path in self._exact or route in self._exact or (
                    self._prefixes and path.startswith(self._prefixes)):
                kind, unrouted = "", ""
            elif route is None:
                kind = (UNMATCHED if self._group or not known
                        else self._format.format(method=method, route=path))
            else:
                kind = self._format.format(method=method, route=route)
            self._cache.put(key, kind, unrouted)
        if unrouted:
            self._count_unrouted(unrouted)
        return kind or None

    def _route(self, scope: Scope) -> tuple[str | None, str]:
        """The request's template, or None and why (a reason of the unrouted counter)."""
        if self._route_of is not None:
            try:
                found = self._route_of(scope)
            except Exception as exc:  # noqa: BLE001 - the host's callback: counted
                guard.absorb("stages.route_of", exc, worker="unknown", registry=self._registry)
                return None, "route_of_error"
            return found, "" if found is not None else "no_route"
        found = scope_template(scope)
        if found is not None:
            return found, ""
        router = self._router
        if router is _LOOK:
            try:
                router = router_of(scope.get("app"), self.app)
            except Exception:  # noqa: BLE001 - an exotic app: treated as an unknown router
                router = None
            self._router = router
            if router is None:
                log.warning(
                    "corevo-obs StagesMiddleware: cannot find route templates in %s "
                    "(not a Starlette, Litestar or werkzeug/Quart router, and no template "
                    "in the scope): its requests are kind %r, counted in "
                    "corevo_task_unrouted_total{reason=\"no_router\"}; pass "
                    "StagesMiddleware(app, route_of=lambda scope: <the route template or "
                    "None>)", type(self.app).__name__, UNMATCHED)
        if router is None:
            return None, "no_router"
        found = router(scope)
        return found, "" if found is not None else "no_route"

    def _count_unrouted(self, reason: str) -> None:
        try:
            self.recorder  # noqa: B018 - builds the counters with the recorder
            self._unrouted[reason].inc()
        except Exception as exc:  # noqa: BLE001 - instrumentation must not fail the request
            guard.absorb("stages", exc, worker="unknown", registry=self._registry)


def resolved_child(rec: StageRecorder, reason: str) -> Any:
    """The unrouted counter of ``rec``'s worker and registry for ``reason``."""
    return Telemetry.resolve(rec.worker, rec.registry).child(
        "corevo_task_unrouted_total", reason=reason)


class _Call:
    """Marks of one connection: the app runs with its tracker current, and whatever way
    it ends (a final send seen by a subclass, an exception, a plain return) finishes the
    task exactly once."""

    __slots__ = ("stages", "first", "done")
    returned_outcome = "completed"

    def __init__(self, stages: TaskStages) -> None:
        self.stages = stages
        self.first = False
        self.done = False

    def end(self, outcome: str) -> None:
        if not self.done:
            self.done = True
            self.stages.finish(outcome)

    async def drive(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        with self.stages.activate():
            try:
                await app(scope, receive, send)
            except BaseException as exc:
                if not self.done:
                    self.done = True
                    self.stages.finish_from(exc)
                raise
        self.end(self.returned_outcome)


class _HttpCall(_Call):
    """One HTTP request's marks, driven by the messages the app sends and receives."""

    __slots__ = ("status",)
    returned_outcome = "failed"  # the app returned without finishing its response

    def __init__(self, stages: TaskStages) -> None:
        super().__init__(stages)
        self.status = 0

    async def run(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        stages = self.stages

        async def tracked_send(message: Message) -> None:
            kind = message["type"]
            if kind == "http.response.body":
                more = message.get("more_body", False)
                await send(message)
                if not self.first and (message.get("body") or not more):
                    self.first = True
                    stages.first_event()
                if not more:
                    self.end("failed" if self.status >= 500 else "completed")
                return
            if kind == "http.response.start":
                self.status = message.get("status", 0)
            await send(message)

        async def tracked_receive() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect":
                self.end("cancelled")
            return message

        await self.drive(app, scope, tracked_receive, tracked_send)


class _SocketCall(_Call):
    """One WebSocket's marks: first ``websocket.send``, then close or disconnect."""

    __slots__ = ()

    async def run(self, app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        stages = self.stages

        async def tracked_send(message: Message) -> None:
            await send(message)
            kind = message["type"]
            if kind == "websocket.send" and not self.first:
                self.first = True
                stages.first_event()
            elif kind == "websocket.close":
                self.end("completed")

        async def tracked_receive() -> Message:
            message = await receive()
            if message["type"] == "websocket.disconnect":
                normal = message.get("code", 1000) in _NORMAL_CLOSE
                self.end("completed" if normal else "cancelled")
            return message

        await self.drive(app, scope, tracked_receive, tracked_send)
