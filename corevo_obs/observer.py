"""The one reporting path for leases, claims and event projection.

A runtime that keeps its own lease/claim code reports through this interface; the
reference implementations in ``corevo_obs.leases``, ``corevo_obs.claims`` and
``corevo_obs.events`` call nothing else. So a dashboard cannot tell (and need not care)
whose implementation produced a number.

Example::

    obs = MetricsObserver(worker="w0")
    obs.lease_acquired("llm", "granted", reaped=2, held=7, limit=10, seconds=0.0004)
    obs.claim("won", queue_wait=1.8)

``Observer`` itself records nothing: subclass it and override what you need.
"""

from __future__ import annotations

import math
from numbers import Real
from typing import Any, Final, Literal

from prometheus_client import CollectorRegistry

from .core.catalog import CATALOG
from .core.errors import ConfigError
from .core.guard import absorb
from .core.metrics import child
from .core.telemetry import HasTelemetry, Telemetry

AcquireOutcome = Literal["granted", "rejected", "fenced", "error"]
HeartbeatOutcome = Literal["renewed", "lost", "error"]
ReleaseOutcome = Literal["released", "noop", "error"]
ClaimOutcomeName = Literal["won", "lost"]
StartOutcomeName = Literal["started", "fenced"]
TerminalState = Literal["completed", "failed", "lost", "timeout", "cancelled"]
DispatchPath = Literal["local", "queued"]
ProjectOutcome = Literal["applied", "duplicate", "buffered", "stale_epoch", "overflow"]
CancelPath = Literal["pubsub", "marker", "lease_expiry"]
CommandOutcome = Literal["applied", "fenced", "no_owner"]


class Observer:
    """Every event the coordination primitives report; the base class ignores them all."""

    # --- leases -------------------------------------------------------------------
    def lease_acquired(
        self,
        quota: str,
        outcome: AcquireOutcome,
        *,
        reaped: int = 0,
        held: int | None = None,
        limit: int | None = None,
        seconds: float | None = None,
    ) -> None:
        """One atomic acquire: its outcome, ghosts it reaped and the count it saw."""

    def lease_heartbeat(self, quota: str, outcome: HeartbeatOutcome) -> None:
        """A renewal; ``lost`` means the holder had already been reaped as dead."""

    def lease_released(
        self, quota: str, outcome: ReleaseOutcome, held_seconds: float | None = None
    ) -> None:
        """A release; ``noop`` removed nothing (a double release or a reaped holder)."""

    def lease_audited(self, quota: str, *, oldest_age: float, orphaned: int) -> None:
        """What an auditor read: the stalest heartbeat and holders whose worker is gone."""

    def lease_counted(self, quota: str, *, held: int, limit: int) -> None:
        """The quota's live holders as a release, a renewal or an audit counted them (an
        acquire reports its count through ``lease_acquired``), and the limit."""

    # --- claims -------------------------------------------------------------------
    def claim(self, outcome: ClaimOutcomeName, *, queue_wait: float | None = None) -> None:
        """One conditional-update claim; ``queue_wait`` is created → claimed, for a win."""

    def started(self, outcome: StartOutcomeName, *, claim_to_start: float | None = None) -> None:
        """One started CAS; ``fenced`` is a stale owner whose epoch/token no longer match."""

    def reclaimed(self, n: int = 1) -> None:
        """Claims released before execution_started because their owner vanished."""

    def terminal(self, state: TerminalState, n: int = 1) -> None:
        """Jobs that reached a terminal state."""

    def dispatch_path(self, path: DispatchPath) -> None:
        """A job run on the accepting worker (local) or through the global queue."""

    # --- events -------------------------------------------------------------------
    def event_projected(self, outcome: ProjectOutcome) -> None:
        """One event offered to a projector, by what the projector did with it."""

    def replayed(self, n: int) -> None:
        """Events that reached the projection only through a durable-history replay."""

    # --- cancel and command routing -----------------------------------------------------
    def cancel_requested(self) -> None:
        """A cancel marker was written and its wake-up published."""

    def cancel_delivered(self, path: CancelPath, *, latency: float | None = None) -> None:
        """A cancel reached its execution (or its lease expired); ``latency`` is request → stop."""

    def command_routed(self, outcome: CommandOutcome) -> None:
        """A routed command: applied or fenced by the owner's re-check, or no owner to route to."""

    def late_side_effect(self) -> None:
        """A write carried the idempotency key of an execution that had acknowledged a cancel."""


def _per_value(telemetry: Telemetry, name: str, label: str, **labels: str) -> dict[str, Any]:
    """One bound child per enumerated value of ``label``: a lookup, not a labels() call."""
    return {v: telemetry.child(name, **labels, **{label: v}) for v in CATALOG[name].values[label]}


_MAX_COUNT: Final = 2**53  # past this a float counter can no longer add one
_MAX_SECONDS: Final = 1e10  # ~317 years: a longer "duration" is a clock or unit bug


def _count(value: object, name: str) -> float:
    """A count to add or set: a number within 0..2**53. NaN, inf, negatives, bools and
    non-numbers raise here, before anything is written (so no counter goes backwards)."""
    if type(value) is int and 0 <= value <= _MAX_COUNT:
        return value
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    if not 0 <= float(value) <= _MAX_COUNT:  # NaN fails both comparisons
        raise ConfigError(f"{name} must be within 0..2**53, got {value!r}")
    return float(value)


def _seconds(value: object, name: str) -> float | None:
    """None, or a finite duration; a negative one (two hosts' clocks) counts as 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, Real):
        raise TypeError(f"{name} must be seconds as a number, got {type(value).__name__}")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds > _MAX_SECONDS:
        raise ConfigError(f"{name} must be finite seconds below 1e10, got {value!r}")
    return seconds if seconds > 0 else 0.0


def _name(value: object, what: str) -> str:
    """A free-form label value (a quota's name): a non-empty string."""
    if type(value) is not str or not value:
        raise TypeError(f"{what} must be a non-empty string, got {value!r}")
    return value


def _unknown(value: object, metric: str) -> ValueError:
    return ValueError(f"{value!r} is not a label value of {metric}")


class _QuotaChildren:
    """The children of one quota, bound once (every outcome, so zero-valued series exist)."""

    def __init__(self, telemetry: Telemetry, quota: str) -> None:
        registry = telemetry.registry
        self.acquire = _per_value(telemetry, "corevo_lease_acquire_total", "outcome", quota=quota)
        self.heartbeat = _per_value(telemetry, "corevo_lease_heartbeat_total", "outcome",
                                    quota=quota)
        self.release = _per_value(telemetry, "corevo_lease_release_total", "outcome", quota=quota)
        self.reaped = telemetry.child("corevo_lease_reaped_total", quota=quota)
        self.seconds = telemetry.child("corevo_lease_acquire_seconds", quota=quota)
        self.hold = telemetry.child("corevo_lease_hold_seconds", quota=quota)
        self.held = child("corevo_lease_held", registry, quota=quota)
        self.limit = child("corevo_lease_limit", registry, quota=quota)
        self.registry, self.quota = registry, quota

    def audited(self) -> tuple[Any, Any]:
        """The auditor's gauges, bound at the first audit: before one, "0 orphaned, age 0"
        would be a reading nobody took."""
        return (child("corevo_lease_oldest_heartbeat_age_seconds", self.registry,
                      quota=self.quota),
                child("corevo_lease_orphaned_holders", self.registry, quota=self.quota))


class _Quota:
    """One quota's hot lease metrics, written through prometheus_client's public API on
    children bound once, and its last written limit.

    One write path for in-process and multiprocess values alike: bench/lease_bench.py
    measured the private fast paths this replaced (one shared lock, direct value writes)
    at a few µs per acquire+release, within the noise of the Redis round trip around it.
    """

    def __init__(self, c: _QuotaChildren) -> None:
        self.children = c
        self.limit_value: int | None = None
        self._acquire = {k: v.inc for k, v in c.acquire.items()}
        self._heartbeat = {k: v.inc for k, v in c.heartbeat.items()}
        self._release = {k: v.inc for k, v in c.release.items()}
        self._reaped, self._held = c.reaped.inc, c.held.set
        self._seconds, self._hold = c.seconds.observe, c.hold.observe

    def acquired(self, outcome: str, reaped: int, held: int | None,
                 seconds: float | None) -> None:
        self._acquire[outcome]()  # a bad outcome raises before anything is written
        if reaped:
            self._reaped(reaped)
        if held is not None:
            self._held(held)
        if seconds is not None:
            self._seconds(seconds)

    def renewed(self, outcome: str) -> None:
        self._heartbeat[outcome]()

    def released(self, outcome: str, held_seconds: float | None) -> None:
        self._release[outcome]()
        if held_seconds is not None:
            self._hold(held_seconds)


class MetricsObserver(HasTelemetry, Observer):
    """Writes the catalog's lease/claim/job/events metrics for one worker.

    Children are bound once (per quota for leases), so a steady-state call costs a dict
    lookup plus the prometheus update. Every method returns normally whatever it is
    given: a bad outcome, quota name or amount (negative, NaN, inf, huge, wrong type; a
    programming error in the caller) and a failing metrics store are absorbed by
    ``guard.absorb`` (counted, logged once) and nothing of that call is written.
    """

    def __init__(
        self,
        *,
        worker: str | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._telemetry = sc = Telemetry.resolve(worker, registry)
        self._quotas: dict[str, _Quota] = {}
        self._claim = _per_value(sc, "corevo_claim_total", "outcome")
        self._start = _per_value(sc, "corevo_claim_start_total", "outcome")
        self._terminal = _per_value(sc, "corevo_job_terminal_total", "state")
        self._path = _per_value(sc, "corevo_job_dispatch_path_total", "path")
        self._projected = _per_value(sc, "corevo_events_projected_total", "outcome")
        self._queue_wait = sc.child("corevo_claim_queue_wait_seconds")
        self._to_start = sc.child("corevo_claim_to_start_seconds")
        self._reclaimed = sc.child("corevo_claim_reclaimed_total")
        self._replayed = sc.child("corevo_events_replayed_total")
        self._cancel_requested = sc.child("corevo_cancel_requested_total")
        self._cancel_delivered = _per_value(sc, "corevo_cancel_delivered_total", "path")
        self._cancel_latency = _per_value(sc, "corevo_cancel_latency_seconds", "path")
        self._routed = _per_value(sc, "corevo_command_routed_total", "outcome")
        self._late = sc.child("corevo_late_side_effects_total")

    def _absorb(self, exc: Exception) -> None:
        absorb("observer", exc, telemetry=self._telemetry)

    def _quota(self, quota: object) -> _Quota:
        found = self._quotas.get(quota) if isinstance(quota, str) else None
        if found is None:
            name = _name(quota, "quota")
            found = self._quotas[name] = _Quota(_QuotaChildren(self._telemetry, name))
        return found

    # --- leases -------------------------------------------------------------------
    def lease_acquired(
        self,
        quota: str,
        outcome: AcquireOutcome,
        *,
        reaped: int = 0,
        held: int | None = None,
        limit: int | None = None,
        seconds: float | None = None,
    ) -> None:
        try:
            m = self._quotas.get(quota) or self._quota(quota)
            if not (type(reaped) is int and 0 <= reaped <= _MAX_COUNT
                    and (held is None or type(held) is int and 0 <= held <= _MAX_COUNT)
                    and (seconds is None or type(seconds) is float
                         and 0.0 <= seconds <= _MAX_SECONDS)):  # the cheap common case
                reaped = _count(reaped, "reaped")  # type: ignore[assignment]
                held = None if held is None else _count(held, "held")  # type: ignore[assignment]
                seconds = _seconds(seconds, "seconds")
            new_limit = limit is not None and limit != m.limit_value
            if new_limit:
                limit = _count(limit, "limit")  # type: ignore[assignment]
            m.acquired(outcome, reaped, held, seconds)
            if new_limit:
                m.children.limit.set(limit)
                m.limit_value = limit
        except Exception as exc:  # noqa: BLE001 - never break the host
            self._absorb(exc)

    def lease_heartbeat(self, quota: str, outcome: HeartbeatOutcome) -> None:
        try:
            (self._quotas.get(quota) or self._quota(quota)).renewed(outcome)
        except Exception as exc:  # noqa: BLE001
            self._absorb(exc)

    def lease_released(
        self, quota: str, outcome: ReleaseOutcome, held_seconds: float | None = None
    ) -> None:
        try:
            m = self._quotas.get(quota) or self._quota(quota)
            m.released(outcome, _seconds(held_seconds, "held_seconds"))
        except Exception as exc:  # noqa: BLE001
            self._absorb(exc)

    def lease_audited(self, quota: str, *, oldest_age: float, orphaned: int) -> None:
        try:
            c = self._quota(quota).children
            age, n = _seconds(oldest_age, "oldest_age"), _count(orphaned, "orphaned")
            if age is None:
                raise TypeError("oldest_age must be seconds as a number, got None")
            age_gauge, orphaned_gauge = c.audited()
            age_gauge.set(age)
            orphaned_gauge.set(n)
        except Exception as exc:  # noqa: BLE001
            self._absorb(exc)

    def lease_counted(self, quota: str, *, held: int, limit: int) -> None:
        try:
            m = self._quotas.get(quota) or self._quota(quota)
            n, new_limit = _count(held, "held"), _count(limit, "limit")
            m.children.held.set(n)
            if new_limit != m.limit_value:
                m.children.limit.set(new_limit)
                m.limit_value = new_limit  # type: ignore[assignment]
        except Exception as exc:  # noqa: BLE001
            self._absorb(exc)

    # --- claims -------------------------------------------------------------------
    def _counted(self, counters: dict[str, Any], outcome: object, metric: str,
                 histogram: Any, seconds: object, n: object = 1) -> None:
        """One labelled counter bump and an optional duration, all checked before either
        is written (the common, valid call pays only the inline type checks)."""
        try:
            counter = counters.get(outcome) if type(outcome) is str else None
            if counter is None:
                raise _unknown(outcome, metric)
            if not (type(n) is int and 0 <= n <= _MAX_COUNT):
                n = _count(n, "n")
            if seconds is not None and not (type(seconds) is float
                                            and 0.0 <= seconds <= _MAX_SECONDS):
                seconds = _seconds(seconds, "seconds")
            if n:
                counter.inc(n)
            if seconds is not None:
                histogram.observe(seconds)
        except Exception as exc:  # noqa: BLE001
            self._absorb(exc)

    def _added(self, counter: Any, n: object) -> None:
        """An unlabelled counter bump by ``n`` (0 writes nothing)."""
        try:
            if not (type(n) is int and 0 <= n <= _MAX_COUNT):
                n = _count(n, "n")
            if n:
                counter.inc(n)
        except Exception as exc:  # noqa: BLE001
            self._absorb(exc)

    def claim(self, outcome: ClaimOutcomeName, *, queue_wait: float | None = None) -> None:
        self._counted(self._claim, outcome, "corevo_claim_total", self._queue_wait, queue_wait)

    def started(self, outcome: StartOutcomeName, *, claim_to_start: float | None = None) -> None:
        self._counted(self._start, outcome, "corevo_claim_start_total", self._to_start,
                      claim_to_start)

    def reclaimed(self, n: int = 1) -> None:
        self._added(self._reclaimed, n)

    def terminal(self, state: TerminalState, n: int = 1) -> None:
        self._counted(self._terminal, state, "corevo_job_terminal_total", None, None, n)

    def dispatch_path(self, path: DispatchPath) -> None:
        self._counted(self._path, path, "corevo_job_dispatch_path_total", None, None)

    # --- events -------------------------------------------------------------------
    def event_projected(self, outcome: ProjectOutcome) -> None:
        self._counted(self._projected, outcome, "corevo_events_projected_total", None, None)

    def replayed(self, n: int) -> None:
        self._added(self._replayed, n)

    # --- cancel and command routing -----------------------------------------------------
    def cancel_requested(self) -> None:
        self._added(self._cancel_requested, 1)

    def cancel_delivered(self, path: CancelPath, *, latency: float | None = None) -> None:
        histogram = self._cancel_latency.get(path) if type(path) is str else None
        self._counted(self._cancel_delivered, path, "corevo_cancel_delivered_total",
                      histogram, latency)

    def command_routed(self, outcome: CommandOutcome) -> None:
        self._counted(self._routed, outcome, "corevo_command_routed_total", None, None)

    def late_side_effect(self) -> None:
        self._added(self._late, 1)
