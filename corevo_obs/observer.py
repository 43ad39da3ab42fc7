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

from typing import Any, Literal

from prometheus_client import CollectorRegistry

from .guard import absorb
from .identity import worker_name
from .metrics import child

AcquireOutcome = Literal["granted", "rejected", "error"]
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


class MetricsObserver(Observer):
    """Writes the catalog's lease/claim/job/events metrics for one worker.

    Children are bound on first use and cached, so a steady-state call costs a dict
    lookup plus the prometheus update. A bad label value (a programming error in the
    caller) is absorbed and logged once, never raised into the host's task.
    """

    def __init__(
        self, *, worker: str | None = None, registry: CollectorRegistry | None = None
    ) -> None:
        self.worker = worker_name(worker)
        self.registry = registry
        self._children: dict[tuple[str, ...], Any] = {}

    def _m(self, name: str, *key: str, **labels: str) -> Any:
        k = (name, *key)
        found = self._children.get(k)
        if found is None:
            found = self._children[k] = child(name, self.registry, **labels)
        return found

    def _bind(self, name: str, **labels: str) -> Any | None:
        """Like ``_m`` but absorbs label errors; returns None when the child is unusable."""
        try:
            return self._m(name, *labels.values(), **labels)
        except Exception as exc:  # noqa: BLE001 - never break the host
            absorb("observer", exc, worker=self.worker, registry=self.registry)
            return None

    def _inc(self, name: str, amount: float = 1, **labels: str) -> None:
        c = self._bind(name, **labels)
        if c is not None:
            c.inc(amount)

    def _observe(self, name: str, value: float, **labels: str) -> None:
        c = self._bind(name, **labels)
        if c is not None:
            c.observe(value)

    def _set(self, name: str, value: float, **labels: str) -> None:
        c = self._bind(name, **labels)
        if c is not None:
            c.set(value)

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
        w = self.worker
        self._inc("corevo_lease_acquire_total", worker=w, quota=quota, outcome=outcome)
        if reaped:
            self._inc("corevo_lease_reaped_total", reaped, worker=w, quota=quota)
        if held is not None:
            self._set("corevo_lease_held", held, quota=quota)
        if limit is not None:
            self._set("corevo_lease_limit", limit, quota=quota)
        if seconds is not None:
            self._observe("corevo_lease_acquire_seconds", seconds, worker=w, quota=quota)

    def lease_heartbeat(self, quota: str, outcome: HeartbeatOutcome) -> None:
        self._inc("corevo_lease_heartbeat_total", worker=self.worker, quota=quota, outcome=outcome)

    def lease_released(
        self, quota: str, outcome: ReleaseOutcome, held_seconds: float | None = None
    ) -> None:
        w = self.worker
        self._inc("corevo_lease_release_total", worker=w, quota=quota, outcome=outcome)
        if held_seconds is not None:
            self._observe("corevo_lease_hold_seconds", held_seconds, worker=w, quota=quota)

    def lease_audited(self, quota: str, *, oldest_age: float, orphaned: int) -> None:
        self._set("corevo_lease_oldest_heartbeat_age_seconds", oldest_age, quota=quota)
        self._set("corevo_lease_orphaned_holders", orphaned, quota=quota)

    # --- claims -------------------------------------------------------------------
    def claim(self, outcome: ClaimOutcomeName, *, queue_wait: float | None = None) -> None:
        self._inc("corevo_claim_total", worker=self.worker, outcome=outcome)
        if queue_wait is not None:
            self._observe("corevo_claim_queue_wait_seconds", max(0.0, queue_wait),
                          worker=self.worker)

    def started(self, outcome: StartOutcomeName, *, claim_to_start: float | None = None) -> None:
        self._inc("corevo_claim_start_total", worker=self.worker, outcome=outcome)
        if claim_to_start is not None:
            self._observe("corevo_claim_to_start_seconds", max(0.0, claim_to_start),
                          worker=self.worker)

    def reclaimed(self, n: int = 1) -> None:
        if n:
            self._inc("corevo_claim_reclaimed_total", n, worker=self.worker)

    def terminal(self, state: TerminalState, n: int = 1) -> None:
        if n:
            self._inc("corevo_job_terminal_total", n, worker=self.worker, state=state)

    def dispatch_path(self, path: DispatchPath) -> None:
        self._inc("corevo_job_dispatch_path_total", worker=self.worker, path=path)

    # --- events -------------------------------------------------------------------
    def event_projected(self, outcome: ProjectOutcome) -> None:
        self._inc("corevo_events_projected_total", worker=self.worker, outcome=outcome)

    def replayed(self, n: int) -> None:
        if n:
            self._inc("corevo_events_replayed_total", n, worker=self.worker)

    # --- cancel and command routing -----------------------------------------------------
    def cancel_requested(self) -> None:
        self._inc("corevo_cancel_requested_total", worker=self.worker)

    def cancel_delivered(self, path: CancelPath, *, latency: float | None = None) -> None:
        self._inc("corevo_cancel_delivered_total", worker=self.worker, path=path)
        if latency is not None:
            self._observe("corevo_cancel_latency_seconds", max(0.0, latency),
                          worker=self.worker, path=path)

    def command_routed(self, outcome: CommandOutcome) -> None:
        self._inc("corevo_command_routed_total", worker=self.worker, outcome=outcome)

    def late_side_effect(self) -> None:
        self._inc("corevo_late_side_effects_total", worker=self.worker)
