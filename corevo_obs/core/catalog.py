"""The single source of truth for every metric the suite exports.

Instrumentation builds its metric objects from these specs (``corevo_obs.core.metrics``);
dashboards, alert rules and docs are generated from or checked against them. A metric
that is not here does not exist.

Label rules: ``worker`` on everything that is per process; enumerated labels list their
values in ``values`` so the label set stays bounded; never an id as a label value.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal

from .errors import CatalogError

Kind = Literal["counter", "gauge", "histogram"]
GaugeMode = Literal[
    "all", "liveall", "min", "livemin", "max", "livemax", "sum", "livesum",
    "mostrecent", "livemostrecent",
]

LAG_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
STALL_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: Task stages (dispatch, first event, external): consecutive bounds from 50 ms to 2.6 s
#: at most 9 % apart, so a 10 % move of a typical latency crosses a bound and shows in
#: p50 and p99 (histogram_quantile interpolates inside one bucket: with 0.1 -> 0.25 s
#: buckets a constant 206 ms read p50 181 ms / p99 249 ms, and 227 ms read the same);
#: coarser below and above. Configurable: ``core.metrics.set_buckets``, $COREVO_BUCKETS_*.
STAGE_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.03, 0.04,
    *(float(f"{0.05 * 1.09 ** k:.3g}") for k in range(47)),
    3.0, 4.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0,
)
LONG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 900.0)
FAST_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
KILL_REASONS = ("timeout",)
STALL_CAUSES = ("blocking", "import", "gc", "gil", "starved", "throttled", "unknown")


@dataclass(frozen=True)
class MetricSpec:
    """One metric: everything needed to build it, chart it and alert on it."""

    name: str
    kind: Kind
    help: str
    group: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] | None = None
    gauge_mode: GaugeMode = "livemax"
    values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: the host endpoint serves it summed across workers (no ``worker`` label) unless
    #: told to keep workers apart: per-kind histograms, whose size is workers x kinds x
    #: buckets (what a per-worker question needs, a per-worker target serves)
    host_sum: bool = False

    def __post_init__(self) -> None:
        if not self.name.startswith("corevo_"):
            raise CatalogError(f"{self.name}: catalog names start with 'corevo_'")
        if self.host_sum and (self.kind == "gauge" or "worker" not in self.labels):
            raise CatalogError(f"{self.name}: host_sum drops the worker label of a sum")
        if self.kind == "counter" and not self.name.endswith("_total"):
            raise CatalogError(f"{self.name}: counters end with '_total'")
        if (self.kind == "histogram") != (self.buckets is not None):
            raise CatalogError(f"{self.name}: buckets go with histograms, and only with them")
        for label in self.values:
            if label not in self.labels:
                raise CatalogError(f"{self.name}: values given for unknown label {label!r}")
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))

    @property
    def sample_names(self) -> tuple[str, ...]:
        """Names as they appear in the exposition (what PromQL can select)."""
        if self.kind == "histogram":
            return (f"{self.name}_bucket", f"{self.name}_sum", f"{self.name}_count")
        return (self.name,)


W = ("worker",)
_SPECS: tuple[MetricSpec, ...] = (
    # --- loop health (failure class 1) ---
    MetricSpec(
        "corevo_event_loop_lag_seconds", "histogram",
        "How late the loop woke a sampler that slept a fixed interval (scheduling debt).",
        "loop", W, LAG_BUCKETS,
    ),
    MetricSpec(
        "corevo_event_loop_heartbeat_timestamp_seconds", "gauge",
        "Unix time the loop last ran its sampler; its age grows while the loop is frozen.",
        "loop", W, gauge_mode="livemax",
    ),
    MetricSpec(
        "corevo_event_loop_stall_in_progress_seconds", "gauge",
        "Age of the stall going on now (0 while the loop runs), set by the watchdog thread "
        "so a scrape sees a loop that is frozen now and has not come back.",
        "loop", W, gauge_mode="livemax",
    ),
    MetricSpec(
        "corevo_worker_killed_total", "counter",
        "Workers the server killed; reason 'timeout' is gunicorn's worker timeout, which "
        "kills a worker whose loop stayed frozen (counted by the gunicorn master).",
        "loop", ("worker", "reason"),
        values={"reason": KILL_REASONS},
    ),
    MetricSpec(
        "corevo_worker_killed_stall_seconds", "gauge",
        "The stall a worker was killed in, served by the gunicorn master beside the kill "
        "count: its age at the kill (from the stall's start, not its last report), the "
        "frozen line and cause. One series per worker slot (the latest kill).",
        "loop", ("worker", "cause", "where"), gauge_mode="mostrecent",
        values={"cause": STALL_CAUSES},
    ),
    MetricSpec(
        "corevo_event_loop_stalls_total", "counter",
        "Stalls longer than the watchdog threshold, counted when they end.",
        "loop", W,
    ),
    MetricSpec(
        "corevo_event_loop_stall_seconds", "histogram",
        "Duration of each stall longer than the watchdog threshold.",
        "loop", W, STALL_BUCKETS,
    ),
    MetricSpec(
        "corevo_event_loop_stalls_by_cause_total", "counter",
        "Stalls by the cause the watchdog attributed (summed over cause: the stall count).",
        "loop", ("worker", "cause"),
        values={"cause": STALL_CAUSES},
    ),
    # --- loop utilization (issue 38) ---
    MetricSpec(
        "corevo_event_loop_busy_seconds_total", "counter",
        "Wall seconds the loop spent running callbacks rather than waiting for I/O or "
        "timers; its rate is the loop's utilization (0 idle .. 1 never waiting).",
        "loop", W,
    ),
    # --- task stages ---
    MetricSpec(
        "corevo_task_dispatch_seconds", "histogram",
        "Accepted until the handler starts on a loop (queueing and scheduling delay).",
        "stages", ("worker", "kind"), STAGE_BUCKETS, host_sum=True,
    ),
    MetricSpec(
        "corevo_task_first_event_seconds", "histogram",
        "Accepted until the first event is emitted to the client.",
        "stages", ("worker", "kind"), STAGE_BUCKETS, host_sum=True,
    ),
    MetricSpec(
        "corevo_task_external_seconds", "histogram",
        "Each wait on an external dependency (model, tool, store), per call.",
        "stages", ("worker", "kind", "dependency"), STAGE_BUCKETS, host_sum=True,
    ),
    MetricSpec(
        "corevo_task_total_seconds", "histogram",
        "Accepted until the task reaches a terminal state.",
        "stages", ("worker", "kind", "outcome"), LONG_BUCKETS,
        values={"outcome": ("completed", "failed", "cancelled", "timeout", "lost")},
        host_sum=True,
    ),
    MetricSpec(
        "corevo_task_mark_errors_total", "counter",
        "Stage marks made out of order or twice (absorbed, never raised into the host).",
        "stages", ("worker", "kind", "reason"),
        values={"reason": ("out_of_order", "duplicate", "after_end")},
    ),
    MetricSpec(
        "corevo_task_unrouted_total", "counter",
        "Requests the ASGI middleware found no route template for, labelled kind "
        "'unmatched': no_route (no route serves it), no_router (the app's router is "
        "unknown: pass route_of=), route_of_error (route_of raised).",
        "stages", ("worker", "reason"),
        values={"reason": ("no_route", "no_router", "route_of_error")},
    ),
    # --- offload adapter ---
    MetricSpec(
        "corevo_offload_in_flight", "gauge",
        "Blocking operations currently running in threads (slots taken).",
        "offload", ("worker", "adapter"), gauge_mode="livesum",
    ),
    MetricSpec(
        "corevo_offload_limit", "gauge",
        "Slots an adapter may hold at once.",
        "offload", ("worker", "adapter"), gauge_mode="livemax",
    ),
    MetricSpec(
        "corevo_offload_waiting", "gauge",
        "Callers waiting for a slot.",
        "offload", ("worker", "adapter"), gauge_mode="livesum",
    ),
    MetricSpec(
        "corevo_offload_slot_wait_seconds", "histogram",
        "Time a caller waited for a slot.",
        "offload", ("worker", "adapter"), FAST_BUCKETS,
    ),
    MetricSpec(
        "corevo_offload_duration_seconds", "histogram",
        "Thread run time of an offloaded operation, by how it ended.",
        "offload", ("worker", "adapter", "outcome"), LATENCY_BUCKETS,
        values={"outcome": ("ok", "error", "cancelled")},
    ),
    MetricSpec(
        "corevo_offload_rejected_total", "counter",
        "Admissions refused, by reason.",
        "offload", ("worker", "adapter", "reason"),
        values={"reason": ("queue_full", "timeout", "closed")},
    ),
    MetricSpec(
        "corevo_offload_sunk_slots_total", "counter",
        "Slots given up for good: the operation was cancelled while its thread still ran "
        "(fail closed).",
        "offload", ("worker", "adapter"),
    ),
    MetricSpec(
        "corevo_offload_errors_total", "counter",
        "Exceptions raised by offloaded calls; those no caller awaits go to the error callback.",
        "offload", ("worker", "adapter"),
    ),
    # --- leases (failure class 3) ---
    MetricSpec(
        "corevo_lease_acquire_total", "counter",
        "Lease acquisitions by outcome; 'fenced' was refused while a restart fence ran (the "
        "backend lost its lease state less than one timeout ago), counted once per admission "
        "however often a waiting one retried.",
        "leases", ("worker", "quota", "outcome"),
        values={"outcome": ("granted", "rejected", "fenced", "error")},
    ),
    MetricSpec(
        "corevo_lease_acquire_seconds", "histogram",
        "Round trip of one acquire (reap + check + add in one atomic step).",
        "leases", ("worker", "quota"), FAST_BUCKETS,
    ),
    MetricSpec(
        "corevo_lease_reaped_total", "counter",
        "Ghost holders (no heartbeat within the lease timeout) removed by acquire.",
        "leases", ("worker", "quota"),
    ),
    MetricSpec(
        "corevo_lease_held", "gauge",
        "Live holders of a quota as counted by the latest acquire, release, renewal or audit.",
        "leases", ("quota",), gauge_mode="mostrecent",
    ),
    MetricSpec(
        "corevo_lease_limit", "gauge",
        "Configured limit of a quota.",
        "leases", ("quota",), gauge_mode="max",
    ),
    MetricSpec(
        "corevo_lease_heartbeat_total", "counter",
        "Lease renewals; 'lost' means a live holder had been judged dead (often a stalled loop).",
        "leases", ("worker", "quota", "outcome"),
        values={"outcome": ("renewed", "lost", "error")},
    ),
    MetricSpec(
        "corevo_lease_release_total", "counter",
        "Releases; 'noop' released nothing and exposes a double-release path.",
        "leases", ("worker", "quota", "outcome"),
        values={"outcome": ("released", "noop", "error")},
    ),
    MetricSpec(
        "corevo_lease_hold_seconds", "histogram",
        "Time from grant to release.",
        "leases", ("worker", "quota"), LONG_BUCKETS,
    ),
    MetricSpec(
        "corevo_lease_oldest_heartbeat_age_seconds", "gauge",
        "Age of the stalest holder's heartbeat, as read by the auditor.",
        "leases", ("quota",), gauge_mode="mostrecent",
    ),
    MetricSpec(
        "corevo_lease_orphaned_holders", "gauge",
        "Holders whose worker is gone, as read by the auditor.",
        "leases", ("quota",), gauge_mode="mostrecent",
    ),
    MetricSpec(
        "corevo_lease_fail_open_total", "counter",
        "Degraded leases granted because the backend failed and the store is fail_open: "
        "the backend never saw them, so the limit does not hold for them.",
        "leases", ("worker", "quota"),
    ),
    MetricSpec(
        "corevo_lease_replica_wait_timeouts_total", "counter",
        "Grants and renewals that no replica confirmed within the WAIT timeout (a grant is "
        "then released and rejected, a renewal confirms nothing).",
        "leases", ("worker", "quota", "op"),
        values={"op": ("acquire", "renew")},
    ),
    MetricSpec(
        "corevo_lease_stranded_total", "counter",
        "Sharded quota: admissions rejected while another shard had a free slot as last seen "
        "(capacity stranded on the wrong shard).",
        "leases", ("worker", "quota"),
    ),
    MetricSpec(
        "corevo_lease_rebalanced_total", "counter",
        "Sharded quota: slots of limit moved from a shard with idle slots to a busy one.",
        "leases", ("worker", "quota"),
    ),
    MetricSpec(
        "corevo_lease_buffered", "gauge",
        "Lease buffer: slots this worker holds pre-leased and unused (named, heartbeated "
        "leases no work runs under; unavailable to other workers up to the idle bound).",
        "leases", ("worker", "quota"), gauge_mode="livesum",
    ),
    MetricSpec(
        "corevo_lease_buffer_total", "counter",
        "Lease buffer: 'hit' an admission served from the buffer (no round trip), 'kept' a "
        "returned lease kept, 'released' one given back to the store (buffer full, no "
        "recent demand, quota crowded), 'idle' released after the idle bound, 'lost' a "
        "buffered lease found lost.",
        "leases", ("worker", "quota", "outcome"),
        values={"outcome": ("hit", "kept", "released", "idle", "lost")},
    ),
    MetricSpec(
        "corevo_breaker_state", "gauge",
        "Circuit breaker of a lease backend: 0 closed, 1 half-open (one probe), 2 open "
        "(calls short-circuited).",
        "leases", ("worker", "backend"),
    ),
    MetricSpec(
        "corevo_breaker_transitions_total", "counter",
        "Circuit breaker state changes, by the state entered.",
        "leases", ("worker", "backend", "to"),
        values={"to": ("closed", "half_open", "open")},
    ),
    MetricSpec(
        "corevo_breaker_short_circuited_total", "counter",
        "Calls refused by an open breaker without reaching the backend.",
        "leases", ("worker", "backend"),
    ),
    # --- claims (failure class 2) ---
    MetricSpec(
        "corevo_claim_total", "counter",
        "Claim attempts by outcome: one conditional update, exactly one winner.",
        "claims", ("worker", "outcome"),
        values={"outcome": ("won", "lost")},
    ),
    MetricSpec(
        "corevo_claim_start_total", "counter",
        "Started CAS by outcome; 'fenced' is a stale owner whose token no longer matches.",
        "claims", ("worker", "outcome"),
        values={"outcome": ("started", "fenced")},
    ),
    MetricSpec(
        "corevo_claim_queue_wait_seconds", "histogram",
        "Job created until claimed.",
        "claims", W, LONG_BUCKETS,
    ),
    MetricSpec(
        "corevo_claim_to_start_seconds", "histogram",
        "Claimed until execution_started.",
        "claims", W, LATENCY_BUCKETS,
    ),
    MetricSpec(
        "corevo_claim_reclaimed_total", "counter",
        "Claims released and requeued because the owner vanished before execution_started.",
        "claims", W,
    ),
    MetricSpec(
        "corevo_job_terminal_total", "counter",
        "Jobs reaching a terminal state.",
        "claims", ("worker", "state"),
        values={"state": ("completed", "failed", "lost", "timeout", "cancelled")},
    ),
    MetricSpec(
        "corevo_job_finish_errors_total", "counter",
        "Finish calls the job database did not take (it did not answer); a retry may still land "
        "the job, else it stays 'running' (CorevoJobsStuckRunning).",
        "claims", W,
    ),
    MetricSpec(
        "corevo_job_running_oldest_seconds", "gauge",
        "Age of the oldest job in 'running' in a jobs table (0: none), as this worker's "
        "latest recovery pass read it.",
        "claims", ("worker", "table"), gauge_mode="livemostrecent",
    ),
    MetricSpec(
        "corevo_job_dispatch_path_total", "counter",
        "Jobs run on the accepting worker (local) or through the global queue (queued).",
        "claims", ("worker", "path"),
        values={"path": ("local", "queued")},
    ),
    # --- event projection ---
    MetricSpec(
        "corevo_events_projected_total", "counter",
        "Execution events consumed by the projector, by outcome.",
        "events", ("worker", "outcome"),
        values={"outcome": ("applied", "duplicate", "buffered", "stale_epoch", "overflow")},
    ),
    MetricSpec(
        "corevo_events_replayed_total", "counter",
        "Events replayed from durable history on reconnect.",
        "events", W,
    ),
    # --- cancel and command routing ---
    MetricSpec(
        "corevo_cancel_requested_total", "counter",
        "Cancels requested (marker written, wake-up published).",
        "cancel", W,
    ),
    MetricSpec(
        "corevo_cancel_delivered_total", "counter",
        "Cancels that reached the executor, by the path that carried them.",
        "cancel", ("worker", "path"),
        values={"path": ("pubsub", "marker", "lease_expiry")},
    ),
    MetricSpec(
        "corevo_cancel_latency_seconds", "histogram",
        "Cancel requested until the execution stopped, per delivery path.",
        "cancel", ("worker", "path"), LATENCY_BUCKETS,
        values={"path": ("pubsub", "marker", "lease_expiry")},
    ),
    MetricSpec(
        "corevo_command_routed_total", "counter",
        "Commands routed to an execution owner, by outcome.",
        "cancel", ("worker", "outcome"),
        values={"outcome": ("applied", "fenced", "no_owner")},
    ),
    MetricSpec(
        "corevo_late_side_effects_total", "counter",
        "Side effects attempted after the execution acknowledged a cancel.",
        "cancel", W,
    ),
    # --- the suite's own health ---
    MetricSpec(
        "corevo_instrumentation_errors_total", "counter",
        "Failures inside the suite (exporter, Redis, metrics dir), absorbed so the host goes on.",
        "self", ("worker", "component"),
    ),
    MetricSpec(
        "corevo_metrics_dir_files", "gauge",
        "Files in the multiprocess metrics directory.",
        "self", (), gauge_mode="mostrecent",
    ),
    MetricSpec(
        "corevo_metrics_dir_dead_writers", "gauge",
        "Writers proven dead whose files await compaction.",
        "self", (), gauge_mode="mostrecent",
    ),
    MetricSpec(
        "corevo_metrics_compactions_total", "counter",
        "Compactions of dead writers' files.",
        "self", (),
    ),
    MetricSpec(
        "corevo_metrics_last_compaction_seconds", "gauge",
        "Duration of the last compaction.",
        "self", (), gauge_mode="mostrecent",
    ),
)

#: Who exposes which counters at 0 when it starts (``core.metrics.zero_counters``, called
#: once by the owner): every combination of a counter's closed ``values``, with the open
#: labels the owner names (``quota``, ``adapter``, ``backend``; ``worker`` is the owner's
#: own) and, for a label no spec closes (``component``), the values that owner produces.
#: So a rule's ``increase()`` sees the first event as a rise from 0, and a series never
#: appears in the middle of a window (client_python's advice for labelled counters).
ZEROED: Mapping[str, Mapping[str, Mapping[str, tuple[str, ...]]]] = MappingProxyType({
    "lease-store": {
        "corevo_lease_acquire_total": {},
        "corevo_lease_reaped_total": {},
        "corevo_lease_heartbeat_total": {},
        "corevo_lease_release_total": {},
        "corevo_lease_fail_open_total": {},
        "corevo_instrumentation_errors_total": {
            "component": ("lease-acquire", "lease-heartbeat", "lease-release")},
    },
    "lease-replicas": {"corevo_lease_replica_wait_timeouts_total": {}},
    "lease-buffer": {"corevo_lease_buffer_total": {}},
    "lease-shards": {"corevo_lease_stranded_total": {}, "corevo_lease_rebalanced_total": {}},
    "breaker": {"corevo_breaker_transitions_total": {},
                "corevo_breaker_short_circuited_total": {}},
    "claims-store": {
        "corevo_claim_total": {},
        "corevo_claim_start_total": {},
        "corevo_claim_reclaimed_total": {},
        "corevo_job_terminal_total": {},
        "corevo_job_dispatch_path_total": {},
        "corevo_job_finish_errors_total": {},
        "corevo_instrumentation_errors_total": {"component": ("claims-db",)},
    },
    "observer": {
        "corevo_claim_total": {},
        "corevo_claim_start_total": {},
        "corevo_claim_reclaimed_total": {},
        "corevo_job_terminal_total": {},
        "corevo_job_dispatch_path_total": {},
        "corevo_events_projected_total": {},
        "corevo_events_replayed_total": {},
        "corevo_cancel_requested_total": {},
        "corevo_cancel_delivered_total": {},
        "corevo_command_routed_total": {},
        "corevo_late_side_effects_total": {},
    },
    "offload": {"corevo_offload_rejected_total": {}, "corevo_offload_sunk_slots_total": {},
                "corevo_offload_errors_total": {}},
    "watchdog": {"corevo_event_loop_stalls_total": {},
                 "corevo_event_loop_stalls_by_cause_total": {}},
    "gunicorn-master": {"corevo_worker_killed_total": {}},
    "stages-middleware": {"corevo_task_unrouted_total": {}},
})
#: Counters no owner can zero: their label values are not known at any start (a task
#: kind, any component's failure), or a collector serves them whole.
NOT_ZEROED: Final = frozenset({
    "corevo_task_mark_errors_total",  # per task kind, bound at the kind's first task
    "corevo_instrumentation_errors_total",  # every other component: at its first failure
    "corevo_metrics_compactions_total",  # served by the mpdir collector, always present
    # made at 0 by the utilization timer's start, only where the loop gives a reading
    # (uvloop off Linux has none: no series rather than a 0 that means nothing)
    "corevo_event_loop_busy_seconds_total",
})

CATALOG: Mapping[str, MetricSpec] = MappingProxyType({s.name: s for s in _SPECS})
if len(CATALOG) != len(_SPECS):  # pragma: no cover - guards editing mistakes
    raise CatalogError("duplicate metric name in catalog")


def spec(name: str) -> MetricSpec:
    """Look up a metric by its exposition name; unknown names are an error, not a new metric."""
    from .errors import CatalogError

    try:
        return CATALOG[name]
    except KeyError:
        raise CatalogError(f"metric {name!r} is not in the catalog") from None


def specs(group: str | None = None) -> Iterator[MetricSpec]:
    """All specs, or those of one group, in catalog order."""
    return (s for s in _SPECS if group is None or s.group == group)


def groups() -> tuple[str, ...]:
    return tuple(dict.fromkeys(s.group for s in _SPECS))


def zero_label_sets(owner: str, **given: str) -> Iterator[tuple[MetricSpec, dict[str, str]]]:
    """Every (counter, label set) ``owner`` exposes at 0 (``ZEROED``), with ``given`` as
    the open labels (``worker`` among them). A counter label that is neither given, nor
    closed, nor listed for the owner is a ``CatalogError``: the owner must name it.

    >>> sorted(l["outcome"] for _, l in zero_label_sets("lease-store", worker="w0",
    ...        quota="llm") if _.name == "corevo_lease_heartbeat_total")
    ['error', 'lost', 'renewed']
    """
    try:
        owned = ZEROED[owner]
    except KeyError:
        raise CatalogError(f"no counters are zeroed by {owner!r}") from None
    for name, listed in owned.items():
        s = CATALOG[name]
        choices: list[tuple[str, tuple[str, ...]]] = []
        for label in s.labels:
            values = listed.get(label) or s.values.get(label) or (
                (given[label],) if label in given else None)
            if values is None:
                raise CatalogError(f"{owner} zeroes {name}: give its {label!r}")
            choices.append((label, values))
        for combo in itertools.product(*(v for _, v in choices)):
            yield s, dict(zip((label for label, _ in choices), combo, strict=True))


def host_summed() -> frozenset[str]:
    """Metrics the host endpoint serves summed across workers by default (``host_sum``)."""
    return frozenset(s.name for s in _SPECS if s.host_sum)


def sample_name_index() -> dict[str, MetricSpec]:
    """Every exposition sample name (``_bucket``, ``_sum``...) mapped to its spec."""
    return {n: s for s in _SPECS for n in s.sample_names}
