"""The four intervals of one task: dispatch, first event, external waits, total.

Splitting a task this way classifies a slow one by itself: "first event slow while
external is steady" points inside the process; a long dispatch tail points at a blocked
loop. Each interval is a histogram from the catalog, labelled with the worker and a
bounded task kind; with a real OpenTelemetry provider the same intervals also become one
task span, stage marks as its events and one child span per external wait.

Marks made out of order, twice or after the end are counted in
``corevo_task_mark_errors_total`` and never raised: instrumentation must not break a task.

Example::

    recorder = StageRecorder(worker="w0", kinds={"chat", "tool"})   # once per process
    stages = recorder.task("chat", accepted_at=job.accepted_at)
    stages.started()
    async with stages.external("model"):
        reply = await model.complete(prompt)
    stages.first_event()
    stages.finish("completed")
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Collection, Mapping
from typing import Any, Final, ParamSpec, TypeVar

from prometheus_client import CollectorRegistry

from .core import guard
from .core.catalog import spec
from .core.errors import ConfigError
from .core.telemetry import HasTelemetry, Telemetry
from .tracing import AttributeValue, TaskSpan, resolve_tracer

__all__ = [
    "Activation",
    "BoundedValues",
    "ExternalWait",
    "StageRecorder",
    "TaskStages",
    "current_stages",
    "external",
    "outcome_of",
    "track_task",
]


OTHER: Final = "other"
DEFAULT_MAX_VALUES: Final = 32
OUTCOMES: Final = spec("corevo_task_total_seconds").values["outcome"]

_STARTED, _FIRST, _FINISHED = 1, 2, 4
_now = time.perf_counter
_new_tracker = object.__new__

P = ParamSpec("P")
R = TypeVar("R")


class BoundedValues:
    """Keeps a label's value set bounded: an allow-list, or the first ``cap`` values seen.

    Anything else maps to ``"other"``, so a caller passing an id by mistake costs one
    series, not one per id.
    """

    __slots__ = ("_admitted", "_open", "_cap", "_lock")

    def __init__(self, allowed: Collection[str] | None = None, *, cap: int = DEFAULT_MAX_VALUES):
        if cap < 1:
            raise ConfigError(f"cap must be at least 1, got {cap}")
        self._admitted: dict[str, str] = {v: v for v in allowed or ()}
        self._admitted[OTHER] = OTHER
        self._open = allowed is None
        self._cap = cap
        self._lock = threading.Lock()

    def __call__(self, raw: str) -> str:
        found = self._admitted.get(raw)
        return found if found is not None else self._admit(raw)

    def _admit(self, raw: str) -> str:
        if not self._open or not isinstance(raw, str):
            return OTHER
        with self._lock:
            if raw not in self._admitted and len(self._admitted) <= self._cap:
                self._admitted[raw] = raw
            return self._admitted.get(raw, OTHER)


class _KindSeries:
    """Children of one (worker, kind), bound once: ``labels()`` per observe costs ~1 µs."""

    __slots__ = ("kind", "dispatch", "first_event", "total", "_external", "_errors", "_rec")

    def __init__(self, rec: StageRecorder, kind: str) -> None:
        telemetry = rec._telemetry
        self.kind = kind
        self._rec = rec
        self.dispatch = telemetry.child("corevo_task_dispatch_seconds", kind=kind)
        self.first_event = telemetry.child("corevo_task_first_event_seconds", kind=kind)
        self.total = {
            o: telemetry.child("corevo_task_total_seconds", kind=kind, outcome=o)
            for o in OUTCOMES
        }
        self._external: dict[str, tuple[str, Any]] = {}
        self._errors: dict[str, Any] = {}

    def external(self, dependency: str) -> tuple[str, Any]:
        """(bounded dependency, its histogram); the hot path is one dict lookup."""
        found = self._external.get(dependency)
        if found is None:
            bounded = self._rec.dependencies(dependency)
            found = self._external.get(bounded)
            if found is None:
                found = (bounded, self._rec._telemetry.child(
                    "corevo_task_external_seconds", kind=self.kind, dependency=bounded,
                ))
                self._external[bounded] = found
        return found

    def mark_error(self, reason: str) -> None:
        found = self._errors.get(reason)
        if found is None:
            found = self._errors[reason] = self._rec._telemetry.child(
                "corevo_task_mark_errors_total", kind=self.kind, reason=reason,
            )
        found.inc()


class StageRecorder(HasTelemetry):
    """Per-process factory of task trackers: binds series once, decides on OTel once.

    Build it after the OpenTelemetry provider is configured (or pass ``tracer_provider``):
    whether spans are made is decided here, so an untraced process pays nothing per task.
    """

    def __init__(
        self,
        *,
        worker: str | None = None,
        registry: CollectorRegistry | None = None,
        kinds: Collection[str] | None = None,
        dependencies: Collection[str] | None = None,
        max_kinds: int = DEFAULT_MAX_VALUES,
        max_dependencies: int = DEFAULT_MAX_VALUES,
        tracer_provider: Any | None = None,
    ) -> None:
        self._telemetry = Telemetry.resolve(worker, registry)
        self.kinds = BoundedValues(kinds, cap=max_kinds)
        self.dependencies = BoundedValues(dependencies, cap=max_dependencies)
        self._series: dict[str, _KindSeries] = {}
        self._lock = threading.Lock()
        try:
            self.tracer = resolve_tracer(tracer_provider)
        except Exception as exc:  # noqa: BLE001 - a broken OTel setup must not stop the host
            guard.absorb("stages.tracing", exc, telemetry=self._telemetry)
            self.tracer = None

    def series(self, kind: str) -> _KindSeries:
        found = self._series.get(kind)  # admitted kinds are keyed by themselves
        if found is not None:
            return found
        bounded = self.kinds(kind)
        found = self._series.get(bounded)
        if found is None:
            with self._lock:
                found = self._series.get(bounded)
                if found is None:
                    found = self._series[bounded] = _KindSeries(self, bounded)
        return found

    def task(
        self,
        kind: str,
        *,
        accepted_at: float | None = None,
        job_id: str | None = None,
        execution_id: str | None = None,
        attributes: Mapping[str, AttributeValue] | None = None,
    ) -> TaskStages:
        """A tracker for one task; ``accepted_at`` is wall-clock (``time.time()``) seconds."""
        t = _new_tracker(TaskStages)
        t._setup(self, kind, accepted_at, job_id, execution_id, attributes)
        return t


_shared: weakref.WeakKeyDictionary[CollectorRegistry, dict[str, StageRecorder]] = (
    weakref.WeakKeyDictionary()
)
_shared_lock = threading.Lock()
_last_shared: tuple[CollectorRegistry | None, str | None, StageRecorder] | None = None


def shared_recorder(
    *,
    worker: str | None = None,
    registry: CollectorRegistry | None = None,
) -> StageRecorder:
    """The process-wide recorder for a worker label and a registry, built on first use.

    Internal: what ``@track_task`` and the middlewares use when given no recorder. A user
    makes a tracker with ``StageRecorder(...).task(kind)``, one way only.

    Built on a task's path, so a bad ``$COREVO_WORKER`` is absorbed there (counted, logged
    once, label ``pid<N>``) instead of failing every ``@track_task`` call.
    """
    global _last_shared
    last = _last_shared
    if last is not None and last[0] is registry and last[1] == worker:
        return last[2]  # the common case: one registry, one worker, every task
    resolved = Telemetry.resolve_on_use("stages", worker, registry)
    with _shared_lock:
        per = _shared.setdefault(resolved.registry, {})
        found = per.get(resolved.worker)
        if found is None:
            found = per[resolved.worker] = StageRecorder(worker=resolved.worker,
                                                         registry=resolved.registry)
    _last_shared = (registry, worker, found)
    return found


class TaskStages:
    """The stage marks of one task, from ``StageRecorder.task()``; one per task, on one loop.

    Intervals are measured on the monotonic clock from ``accepted``. ``accepted_at`` is a
    wall-clock timestamp so a task accepted on another worker (or before a queue) keeps
    its true age; a timestamp in the future (clock skew) counts as "now".
    """

    __slots__ = ("_s", "_rec", "_accepted", "_marks", "_span", "_wall_anchor", "_exemplar")

    def __init__(self, *args: object, **kwargs: object) -> None:
        raise TypeError("a TaskStages is made by StageRecorder(...).task(kind) "
                        "(or by @track_task and the middlewares), not constructed directly")

    def _setup(
        self,
        rec: StageRecorder,
        kind: str,
        accepted_at: float | None,
        job_id: str | None,
        execution_id: str | None,
        attributes: Mapping[str, AttributeValue] | None,
    ) -> None:
        now = _now()
        self._rec = rec
        self._s = rec._series.get(kind) or rec.series(kind)
        self._marks = 0
        self._span: TaskSpan | None = None
        self._exemplar: dict[str, str] | None = None
        if accepted_at is None:
            self._accepted = now
        else:
            self._accepted = now - max(0.0, time.time() - accepted_at)
        if rec.tracer is not None:
            self._open_span(now, job_id, execution_id, attributes)

    @property
    def kind(self) -> str:
        """The bounded kind label this task is recorded under."""
        return self._s.kind

    @property
    def finished(self) -> bool:
        return bool(self._marks & _FINISHED)

    @property
    def span(self) -> Any | None:
        """The OTel task span, or None when tracing is off (parent your own spans on it)."""
        return None if self._span is None else self._span.span

    def started(self) -> None:
        """The handler runs on a loop now: records dispatch (accepted -> here)."""
        self._mark(_STARTED, "started", self._s.dispatch)

    def first_event(self) -> None:
        """The first event went to the client: records first event (accepted -> here)."""
        self._mark(_FIRST, "first_event", self._s.first_event)

    def _mark(self, bit: int, name: str, hist: Any) -> None:
        now = _now()
        try:
            m = self._marks
            if m & (bit | _FINISHED):
                self._s.mark_error("after_end" if m & _FINISHED else "duplicate")
                return
            if m > bit:  # a later stage was marked before this one: still a true interval
                self._s.mark_error("out_of_order")
            self._marks = m | bit
            seconds = now - self._accepted
            hist.observe(seconds, self._exemplar)
            if self._span is not None:
                self._span.event(name, self._wall_ns(now), seconds)
        except Exception as exc:  # noqa: BLE001 - never raise into the host task
            self._absorb(exc)

    def external(self, dependency: str) -> ExternalWait:
        """Time one wait on a dependency: ``async with stages.external("model"): ...``."""
        return ExternalWait(self, dependency)

    def activate(self) -> Activation:
        """Make this the tracker ``current_stages()`` returns in this context.

        Middleware and job runners that create the tracker themselves use it so that
        handlers and client hooks reach the task without being handed it::

            with stages.activate():
                await handler(request)
        """
        return Activation(self)

    def finish(self, outcome: str = "completed") -> None:
        """Terminal state reached: records total (accepted -> here) under ``outcome``."""
        now = _now()
        try:
            if self._marks & _FINISHED:
                self._s.mark_error("duplicate")
                return
            self._marks |= _FINISHED
            hist = self._s.total.get(outcome)
            if hist is None:
                self._absorb(ValueError(f"task outcome {outcome!r} is not one of {OUTCOMES}"))
                outcome, hist = "failed", self._s.total["failed"]
            seconds = now - self._accepted
            hist.observe(seconds, self._exemplar)
            if self._span is not None:
                self._span.end(outcome, self._wall_ns(now), seconds)
        except Exception as exc:  # noqa: BLE001 - never raise into the host task
            self._absorb(exc)

    def finish_from(self, exc: BaseException | None) -> None:
        """Finish with the outcome an exception (or its absence) implies."""
        self.finish(outcome_of(exc))

    # --- internals -------------------------------------------------------------------

    def _open_span(
        self,
        now: float,
        job_id: str | None,
        execution_id: str | None,
        attributes: Mapping[str, AttributeValue] | None,
    ) -> None:
        try:
            self._wall_anchor = (time.time_ns(), now)
            attrs: dict[str, AttributeValue] = dict(attributes or {})
            if job_id is not None:
                attrs["corevo.job.id"] = job_id
            if execution_id is not None:
                attrs["corevo.execution.id"] = execution_id
            self._span = TaskSpan(
                self._rec.tracer, kind=self._s.kind, worker=self._rec.worker,
                start_ns=self._wall_ns(self._accepted), attributes=attrs,
            )
            self._exemplar = self._span.exemplar()
        except Exception as exc:  # noqa: BLE001 - tracing is optional, the task is not
            self._span = None
            self._absorb(exc)

    def _wall_ns(self, mono: float) -> int:
        wall_ns, anchor = self._wall_anchor
        return wall_ns + int((mono - anchor) * 1e9)

    def _absorb(self, exc: BaseException) -> None:
        guard.absorb("stages", exc, telemetry=self._rec._telemetry)


class ExternalWait:
    """One timed wait on a dependency; usable as ``with`` or ``async with``."""

    __slots__ = ("_t", "_dep", "_hist", "_t0", "_child")

    def __init__(self, tracker: TaskStages, dependency: str) -> None:
        self._t = tracker
        s = tracker._s
        self._dep, self._hist = s._external.get(dependency) or s.external(dependency)
        self._child: Any = None

    def __enter__(self) -> ExternalWait:
        t = self._t
        if t._marks & _FINISHED or t._span is not None:
            self._begin_slow(t)
        self._t0 = _now()
        return self

    def __exit__(self, et: object, exc: BaseException | None, tb: object) -> None:
        now = _now()
        try:
            self._hist.observe(now - self._t0, self._t._exemplar)
            if self._child is not None:
                TaskSpan.end_external(self._child, self._t._wall_ns(now), exc)
        except Exception as err:  # noqa: BLE001 - never raise into the host task
            self._t._absorb(err)

    async def __aenter__(self) -> ExternalWait:
        t = self._t
        if t._marks & _FINISHED or t._span is not None:
            self._begin_slow(t)
        self._t0 = _now()
        return self

    async def __aexit__(self, et: object, exc: BaseException | None, tb: object) -> None:
        self.__exit__(et, exc, tb)

    def _begin_slow(self, t: TaskStages) -> None:
        try:
            if t._marks & _FINISHED:
                t._s.mark_error("after_end")  # still timed: the wait really happened
            if t._span is not None:
                self._child = t._span.start_external(self._dep, t._wall_ns(_now()))
        except Exception as exc:  # noqa: BLE001 - never raise into the host task
            t._absorb(exc)


class Activation:
    """``with``-scope in which ``current_stages()`` returns one tracker (see ``activate``)."""

    __slots__ = ("_stages", "_token")

    def __init__(self, stages: TaskStages) -> None:
        self._stages = stages

    def __enter__(self) -> TaskStages:
        self._token = _current.set(self._stages)
        return self._stages

    def __exit__(self, et: object, exc: BaseException | None, tb: object) -> None:
        _current.reset(self._token)


def outcome_of(exc: BaseException | None) -> str:
    """Map how a handler ended to a catalog outcome."""
    if exc is None:
        return "completed"
    if isinstance(exc, TimeoutError):
        return "timeout"
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled"
    return "failed"


_current: contextvars.ContextVar[TaskStages | None] = contextvars.ContextVar(
    "corevo_task_stages", default=None
)


def one_recorder(recorder: StageRecorder | None, worker: str | None,
                 registry: CollectorRegistry | None, *, source: str) -> None:
    """A ``recorder=`` already says who reports: with ``worker=`` or ``registry=`` too, one
    of them would be silently ignored, so the pair is a ``ConfigError`` naming both."""
    if recorder is not None and (worker is not None or registry is not None):
        given = " and ".join(k for k, v in (("worker=", worker), ("registry=", registry))
                             if v is not None)
        raise ConfigError(f"recorder= and {given} conflict: the recorder's own worker and "
                          f"registry are used; pass one or the other", source=source)


def current_stages() -> TaskStages | None:
    """The tracker of the task running in this context (set by ``@track_task``)."""
    return _current.get()


def track_task(
    kind: str,
    *,
    recorder: StageRecorder | None = None,
    worker: str | None = None,
    registry: CollectorRegistry | None = None,
    accepted_at_arg: str | None = None,
    job_id_arg: str | None = None,
    execution_id_arg: str | None = None,
) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Decorate an async handler: started on entry, finished by how it returns or raises.

    The decorator cannot see a task before its handler runs, so dispatch is only
    meaningful with ``accepted_at_arg``: the name of the handler's keyword argument that
    carries the wall-clock accept time. ``job_id_arg`` / ``execution_id_arg`` name the
    keyword arguments whose values become the span's ``corevo.job.id`` /
    ``corevo.execution.id`` (never metric labels). Inside, ``current_stages()`` gives the
    tracker, so the handler marks its own first event (a stream's first chunk).
    ``recorder=`` with ``worker=`` / ``registry=`` is a ``ConfigError``.
    """
    one_recorder(recorder, worker, registry, source="track_task")

    def decorate(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        @functools.wraps(fn)
        async def handler(*args: P.args, **kwargs: P.kwargs) -> R:
            rec = (recorder if recorder is not None
                   else shared_recorder(worker=worker, registry=registry))
            at = kwargs.get(accepted_at_arg) if accepted_at_arg is not None else None
            job = kwargs.get(job_id_arg) if job_id_arg is not None else None
            ex = kwargs.get(execution_id_arg) if execution_id_arg is not None else None
            stages = rec.task(
                kind, accepted_at=at if isinstance(at, int | float) else None,
                job_id=None if job is None else str(job),
                execution_id=None if ex is None else str(ex),
            )
            stages.started()
            token = _current.set(stages)
            try:
                result = await fn(*args, **kwargs)
            except BaseException as exc:
                if not stages.finished:
                    stages.finish_from(exc)
                raise
            finally:
                _current.reset(token)
            if not stages.finished:
                stages.finish("completed")
            return result

        return handler

    return decorate


def external(dependency: str) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Decorate an async client call so each call is timed as an external wait.

    Outside a ``@track_task`` handler (no current tracker) the call runs untimed.
    """

    def decorate(fn: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        @functools.wraps(fn)
        async def call(*args: P.args, **kwargs: P.kwargs) -> R:
            stages = _current.get()
            if stages is None:
                return await fn(*args, **kwargs)
            async with stages.external(dependency):
                return await fn(*args, **kwargs)

        return call

    return decorate
