"""The five observations of the design's validation workload, judged against budgets.

Each verdict is ``passed``, ``failed`` or ``not exercised`` (the app never produced the
series: an honest gap, never a made-up zero), with the measurement, the budget and a
sentence that names what to look at: the worker, the blocking line, how far the
heartbeat moved. A failure is only declared when the measurement is certainly over the
budget (a lag maximum known as a bucket range fails when its lower edge is at or over).

Every verdict and stall carries a ``cause`` field: the cause the worker's stall report
named (blocking code, a slow import, GC, another thread holding the GIL, CPU starvation,
cgroup throttling; docs/loop-health.md), the most frequent one where stalls are grouped,
None where no stall line was read.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal

from .driver import DriverResult, ProbeSample, quantile
from .observe import HistSummary, summarize
from .server import StallLine
from .workload import Workload

Status = Literal["passed", "failed", "not exercised"]


@dataclass(frozen=True)
class Verdict:
    name: str
    status: Status
    message: str
    measured: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, Any] = field(default_factory=dict)
    worker: str | None = None
    where: str | None = None
    cause: str | None = None

    @property
    def failed(self) -> bool:
        return self.status == "failed"

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "status": self.status, "message": self.message,
                "measured": self.measured, "budget": self.budget, "worker": self.worker,
                "where": self.where, "cause": self.cause}


@dataclass
class Observations:
    """Everything the verdicts read, gathered by the run."""

    lag: dict[str, HistSummary]
    stalls: list[StallLine]
    stall_counts: dict[str, float]
    stalls_logged: bool
    driver: DriverResult
    offload_present: bool
    offload_rejected: dict[str, float]
    offload_waiting_max: float
    offload_slot_wait: dict[float, float]  # cumulative buckets of the load's slot waits
    late_present: bool
    late_side_effects: float
    cancels_requested: float
    cancels_acknowledged: dict[str, float]  # by the path that carried them
    claims_present: bool
    claims: dict[str, Any]
    upstream_stats: dict[str, int]


def probe_stats(samples: list[ProbeSample], phase: str) -> dict[str, Any]:
    mine = [s for s in samples if s.phase == phase]
    lat = sorted(s.latency for s in mine if s.latency is not None)
    return {"count": len(mine), "failed": sum(1 for s in mine if s.latency is None),
            "p50_seconds": quantile(lat, 0.5), "p99_seconds": quantile(lat, 0.99),
            "max_seconds": lat[-1] if lat else None}


def judge(w: Workload, o: Observations) -> list[Verdict]:
    return [_lag(w, o), _stalls(w, o), _probe(w, o, "heartbeat"), _probe(w, o, "first_event"),
            _offload(w, o), _upstream(w, o), _late(w, o), _restart(w, o)]


def _lag(w: Workload, o: Observations) -> Verdict:
    b = w.budgets
    budget = {"p99_seconds": b.lag_p99_seconds, "max_seconds": b.lag_max_seconds}
    per = {k: v.as_dict() for k, v in o.lag.items()}
    if not o.lag or not any(v.count for v in o.lag.values()):
        return Verdict("loop_lag", "failed", "no loop lag samples were read during the load "
                       "(is install_loop_health running in every worker?)", per, budget)
    bad = []
    for worker, s in o.lag.items():
        reasons = []
        if s.p99 is not None and s.p99 > b.lag_p99_seconds:
            reasons.append(f"p99 {s.p99:.3f} s > {b.lag_p99_seconds:g} s")
        if s.max_lo is not None and s.max_lo >= b.lag_max_seconds:
            reasons.append(f"max over {s.max_lo:g} s >= {b.lag_max_seconds:g} s")
        if reasons:
            bad.append((worker, reasons))
    if not bad:
        worst = max(o.lag.items(), key=lambda kv: kv[1].p99 or 0.0)
        return Verdict("loop_lag", "passed",
                       f"every worker within budget (worst p99: {worst[0]} "
                       f"{(worst[1].p99 or 0):.4f} s)", per, budget)
    worker, reasons = bad[0]
    where = _top_line(o.stalls, worker)
    at = f"; stalls at {where}" if where else ""
    others = f" (also {', '.join(x for x, _ in bad[1:])})" if len(bad) > 1 else ""
    cause = _top_cause(o.stalls, worker, where) if where else None
    why = f" [{cause}]" if cause else ""
    return Verdict("loop_lag", "failed",
                   f"worker {worker}: lag {', '.join(reasons)}{at}{why}{others}", per, budget,
                   worker=worker, where=where, cause=cause)


def _top_line(stalls: list[StallLine], worker: str | None = None) -> str | None:
    lines = Counter(s.where for s in stalls if worker is None or s.worker == worker)
    return lines.most_common(1)[0][0] if lines else None


def _top_cause(stalls: list[StallLine], worker: str | None = None,
               where: str | None = None) -> str | None:
    """The cause most of these stalls were reported with (ties: the longest stall's)."""
    picked = [s for s in stalls if s.cause is not None
              and (worker is None or s.worker == worker) and (where is None or s.where == where)]
    if not picked:
        return None
    counts = Counter(s.cause for s in picked)
    best = max(counts.values())
    return max((s for s in picked if counts[s.cause] == best), key=lambda s: s.duration).cause


def _stalls(w: Workload, o: Observations) -> Verdict:
    limit = w.budgets.stall_max_seconds
    over = [s for s in o.stalls if s.duration > limit]
    groups: dict[tuple[str, str], list[StallLine]] = defaultdict(list)
    for s in over:
        groups[(s.worker, s.where)].append(s)
    measured = {
        "counted_by_worker": {k: int(v) for k, v in sorted(o.stall_counts.items())},
        "logged": [s.as_dict() for s in o.stalls[:200]],
        "over_budget": [{"worker": k[0], "where": k[1], "count": len(v),
                         "longest_seconds": max(x.duration for x in v),
                         "function": v[0].function, "cause": _top_cause(v)}
                        for k, v in sorted(groups.items(), key=lambda kv: -len(kv[1]))],
    }
    budget = {"stall_max_seconds": limit}
    if not groups:
        counted = int(sum(o.stall_counts.values()))
        note = "" if o.stalls_logged else " (no server log: lines unknown)"
        return Verdict("stalls", "passed",
                       f"no stall longer than {limit:g} s ({counted} counted in all, "
                       f"{len(o.stalls)} logged){note}", measured, budget)
    ranked = sorted(groups.items(), key=lambda kv: -len(kv[1]))
    (worker, where), first = ranked[0]
    longest = max(s.duration for s in first)
    cause = _top_cause(first)
    why = f" [{cause}]" if cause else ""
    also = "".join(f"; also {w} {len(v)}x at {at}" for (w, at), v in ranked[1:4])
    return Verdict("stalls", "failed",
                   f"worker {worker} stalled {len(first)}x up to {longest:.3f} s at {where}"
                   f" ({first[0].function}){why}{also}", measured, budget, worker=worker,
                   where=where, cause=cause)


def _probe(w: Workload, o: Observations, which: str) -> Verdict:
    samples = o.driver.heartbeat if which == "heartbeat" else o.driver.first_event
    spec = w.heartbeat if which == "heartbeat" else w.first_event
    limit = (w.budgets.heartbeat_p99_increase_seconds if which == "heartbeat"
             else w.budgets.first_event_p99_increase_seconds)
    budget = {"p99_increase_seconds": limit}
    if spec is None:
        return Verdict(which, "not exercised", "no probes.first_event in the workload",
                       {}, budget)
    idle, load = probe_stats(samples, "baseline"), probe_stats(samples, "load")
    measured = {"path": spec.path, "kind": spec.kind, "idle": idle, "load": load}
    label = f"{which.replace('_', '-')} {spec.path}"
    if idle["p99_seconds"] is None or load["p99_seconds"] is None:
        return Verdict(which, "failed", f"{label}: no successful probe "
                       f"({idle['failed']} idle and {load['failed']} loaded failures)",
                       measured, budget)
    moved = load["p99_seconds"] - idle["p99_seconds"]
    measured["p99_increase_seconds"] = round(moved, 6)
    text = (f"{label} p99 moved {idle['p99_seconds'] * 1000:.1f} ms idle -> "
            f"{load['p99_seconds'] * 1000:.1f} ms under load ({moved * 1000:+.1f} ms, "
            f"budget +{limit * 1000:.0f} ms; max {(load['max_seconds'] or 0) * 1000:.0f} ms)")
    failures = load["failed"]
    if moved > limit or failures:
        extra = f"; {failures} probes failed under load" if failures else ""
        where = _top_line(o.stalls)
        by = f"; interference from stalls at {where}" if where else ""
        return Verdict(which, "failed", f"{text}{extra}{by}", measured, budget, where=where)
    return Verdict(which, "passed", text, measured, budget)


def _offload(w: Workload, o: Observations) -> Verdict:
    limit = w.budgets.offload_rejected
    budget = {"rejected": limit}
    if not o.offload_present:
        return Verdict("offload", "not exercised",
                       "the app reported no offload adapter (corevo_offload_* absent)",
                       {}, budget)
    rejected = int(sum(o.offload_rejected.values()))
    wait = summarize(o.offload_slot_wait) if o.offload_slot_wait else None
    calls = wait.count if wait else 0
    # an immediate grant is observed as 0 s: everything above the first bucket queued
    first = min(o.offload_slot_wait, default=0.0)
    queued = max(0, calls - int(round(o.offload_slot_wait.get(first, 0.0))))
    measured = {"rejected_by_reason": {k: int(v) for k, v in o.offload_rejected.items()},
                "calls": calls, "queued": queued, "queued_over_seconds": first,
                "slot_wait": wait.as_dict() if wait else None,
                "waiting_max": o.offload_waiting_max}
    if calls == 0 and rejected == 0:
        return Verdict("offload", "not exercised", "the app has an offload adapter, but no "
                       "call went through it during the load", measured, budget)
    reasons = ", ".join(f"{k} {int(v)}" for k, v in o.offload_rejected.items() if v)
    p99 = wait.p99 if wait and wait.p99 is not None else 0.0
    text = (f"{calls} offloaded calls, {queued} queued for a slot (wait p99 "
            f"{p99 * 1000:.1f} ms; at most {o.offload_waiting_max:g} waiting at a scrape), "
            f"{rejected} rejected ({reasons or 'none'})")
    return Verdict("offload", "failed" if rejected > limit else "passed", text, measured,
                   budget)


def _upstream(w: Workload, o: Observations) -> Verdict:
    limit = w.budgets.upstream_error_rate
    budget = {"error_rate": limit}
    entries = {i for i, m in enumerate(w.mix) if m.calls_upstream}
    if not entries:
        return Verdict("upstream", "not exercised",
                       "no mix entry has calls_upstream = true", {}, budget)
    kill = o.driver.kill or {}
    lo, hi = kill.get("at", -1.0), kill.get("replaced_at") or kill.get("at", -1.0) + 2.0
    mine = [x for x in o.driver.outcomes if x.entry in entries]
    judged = [x for x in mine if x.outcome in ("ok", "error_5xx", "error_4xx",
                                               "connection_error", "redirect_refused")]
    killed = [x for x in judged if x.outcome == "connection_error" and lo <= x.started <= hi]
    judged = [x for x in judged if x not in killed]
    errors = sum(1 for x in judged if x.outcome != "ok")
    rate = errors / len(judged) if judged else 0.0
    measured = {"requests": len(judged), "errors": errors, "error_rate": round(rate, 4),
                "dropped_by_the_kill": len(killed), "upstream_served": o.upstream_stats}
    if not judged:
        return Verdict("upstream", "not exercised",
                       "no upstream-calling request completed", measured, budget)
    served = o.upstream_stats.get("requests", 0) + o.upstream_stats.get("streams", 0)
    text = (f"{errors} of {len(judged)} upstream-calling requests failed ({rate:.2%}); "
            f"the upstream served {served}")
    return Verdict("upstream", "failed" if rate > limit else "passed", text, measured, budget)


def _late(w: Workload, o: Observations) -> Verdict:
    limit = w.budgets.late_side_effects
    budget = {"late_side_effects": limit}
    cancels = sum(1 for x in o.driver.outcomes if x.outcome == "cancelled")
    acked = int(sum(o.cancels_acknowledged.values()))
    measured: dict[str, Any] = {
        "client_cancels": cancels, "cancels_requested": int(o.cancels_requested),
        "cancels_acknowledged": {k: int(v) for k, v in o.cancels_acknowledged.items()}}
    if not o.late_present:
        return Verdict("late_side_effects", "not exercised",
                       f"{cancels} client cancels sent, but the app reports no cancel "
                       "acknowledgements (corevo_late_side_effects_total absent: cancel "
                       "through corevo_obs.cancel or the Observer to measure it)",
                       measured, budget)
    if acked == 0:
        return Verdict("late_side_effects", "not exercised",
                       f"{cancels} client cancels sent, {int(o.cancels_requested)} cancels "
                       "requested, none acknowledged by an execution: no side effect could "
                       "be late (corevo_cancel_delivered_total did not move)", measured, budget)
    n = int(o.late_side_effects)
    measured["late_side_effects"] = n
    paths = ", ".join(f"{k} {int(v)}" for k, v in o.cancels_acknowledged.items() if v)
    return Verdict("late_side_effects", "failed" if n > limit else "passed",
                   f"{n} side effects after an acknowledged cancel ({acked} cancels "
                   f"acknowledged: {paths}; {cancels} client cancels)", measured, budget)


def _restart(w: Workload, o: Observations) -> Verdict:
    limit = w.budgets.half_finished
    budget = {"half_finished": limit}
    kill = o.driver.kill
    measured: dict[str, Any] = {"kill": kill, "claims": o.claims}
    if w.kill_worker_at_seconds is None:
        return Verdict("restart", "not exercised", "no kill_worker_at_seconds in the workload",
                       measured, budget)
    if not kill or not kill.get("killed_pid"):
        why = (kill or {}).get("reason", "no worker was killed")
        return Verdict("restart", "not exercised", why, measured, budget)
    who = f"{kill.get('worker') or '?'} (pid {kill['killed_pid']})"
    if kill.get("replaced_after_seconds") is None:
        return Verdict("restart", "failed", f"worker {who} was SIGKILLed and no replacement "
                       "reported within the wait", measured, budget, worker=kill.get("worker"))
    at = kill["at"] - o.driver.load_start
    back = (f"worker {who} SIGKILLed {at:.1f} s into the load, replaced by pid "
            f"{kill.get('new_pid')} as {kill.get('new_worker') or '?'} after "
            f"{kill['replaced_after_seconds']:.1f} s")
    if not o.claims_present or not o.claims.get("started"):
        why = ("reports no claims or events through the observer" if not o.claims_present
               else "started no claim during the load")
        return Verdict("restart", "not exercised",
                       f"{back}; half-finished claims/events: not exercised (the app {why})",
                       measured, budget, worker=kill.get("worker"))
    half = int(o.claims.get("half_finished", 0))
    reclaimed = int(o.claims.get("reclaimed", 0))
    lost = int(o.claims.get("terminal", {}).get("lost", 0))
    left = kill.get("left_running")
    settled = o.claims.get("settled_after_seconds")
    after = f" (settled {settled:g} s after the load)" if settled is not None else ""
    tally = (f"{half} of {int(o.claims['started'])} started claims not terminal after the "
             f"run{after}, {lost} marked lost, {reclaimed} reclaimed before start")
    if left == 0 and reclaimed == 0:
        return Verdict("restart", "not exercised",
                       f"{back}; the kill caught no claim in flight, so recovery had nothing "
                       f"to reconcile ({tally})", measured, budget, worker=kill.get("worker"))
    caught = ("what it left running is unknown" if left is None
              else f"it left {left} claims running")
    return Verdict("restart", "failed" if half > limit else "passed",
                   f"{back}; {caught}; {tally}", measured, budget, worker=kill.get("worker"))


def summary_line(verdicts: list[Verdict]) -> str:
    failed = [v for v in verdicts if v.failed]
    if not failed:
        return "all budgets held"
    return "budget broken: " + "; ".join(f"{v.name}: {v.message}" for v in failed)
