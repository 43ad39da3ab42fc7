"""The demo's diagnosis as text: one section per drill, then a three-line summary."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

COLUMN_SECONDS = 0.5


def _s(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}s"


def _path(path: str) -> str:
    """Relative to the current directory when inside it (shorter, still clickable)."""
    rel = os.path.relpath(path) if os.path.isabs(path) else path
    return path if rel.startswith("..") else rel


def _frame(frame: str) -> str:
    path, line, function = frame.rsplit(":", 2)
    return f"{_path(path)}:{line} in {function}"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in counts.items()) or "-"


def _summary_frozen(d1: dict[str, Any]) -> str:
    if "stall" not in d1:
        return "no stall detected"
    c = d1["stall"]["culprit"] or {}
    return (f"{d1['stall']['worker']} froze {d1['stall']['duration_seconds']:.2f}s "
            f"at {_path(c.get('file', '?'))}:{c.get('line', '?')} ({c.get('function', '?')})")


def _summary_sticky(d2: dict[str, Any]) -> str:
    waits, owner = d2["short_dispatch_seconds"], d2["short_task_owner"]
    return (f"short task behind a long one: waited {_s(waits['local'])} on {owner['local']} "
            f"(local-only), {_s(waits['claim'])} when idle {owner['claim']} claimed it")


def _summary_quota(d3: dict[str, Any]) -> str:
    return (f"{len(d3['kills'])} SIGKILLs: counter leaked {d3['counter']['leaked_slots']}"
            f"/{d3['limit']} slots for good; leases reaped {d3['leases']['reaped']} ghosts, "
            f"{d3['leases']['free_at_end']}/{d3['limit']} free again")


def _frozen(d: dict[str, Any]) -> None:
    print("Drill 1: sync I/O inside async def")
    if "stall" in d:
        s = d["stall"]
        c = s["culprit"]
        where = (f"{_path(c['file'])}:{c['line']} in {c['function']}" if c
                 else "(stack not captured)")
        print(f"  frozen worker : {s['worker']} for {s['duration_seconds']:.3f}s "
              f"(injected: {d['injected_worker']})")
        print(f"  blocking line : {where}")
        for frame in reversed(d.get("call_chain", [])[:-1]):
            print(f"    called from : {_frame(frame)}")
        print(f"  max lag       : {_s(d['max_lag_seconds'])}")
        print(f"  heartbeat age : up to {_s(d['heartbeat_age_seconds'])} in the gauge scraped "
              f"from {d['scraped_worker']}'s /metrics every ~{d['scrape_every_seconds']:.2f}s")
        print(f"                  ({d['scrapes_answered_while_frozen']} scrapes answered while "
              "frozen: the endpoint has its own thread)")
    else:
        print("  no stall detected")
    fixed = d.get("offloaded_worker")
    if fixed:
        r = d["workers"][fixed]
        stalls = f"{len(r['stalls'])} stall(s)" if r["stalls"] else "no stall"
        print(f"  offloaded     : {fixed} made the same {r['drill_seconds']:.2f}s call through "
              f"OffloadAdapter: max lag {r['max_lag_seconds']:.3f}s, {stalls}")
    print(f"  {'worker':<8}{'max lag':>9}{'gauge age':>11}{'heartbeat gap':>15}"
          f"{'model median':>14}")
    for n, r in d["workers"].items():
        print(f"  {n:<8}{_s(r['max_lag_seconds']):>9}"
              f"{_s(r['scraped_heartbeat_max_age_seconds']):>11}"
              f"{_s(r['heartbeat_max_gap_seconds']):>15}"
              f"{_s(r['model_latency_median_seconds']):>14}")
    some = next(iter(d["workers"].values()))
    print(f"  (heartbeat: an unrelated {some['heartbeat_every_seconds']:.2f}s tick; model: a "
          f"fake call fixed at {some['model_latency_seconds']:.3f}s)")
    if "stall" in d:
        print("  -> the unrelated heartbeat stalled only on the frozen worker while the model's")
        print("     latency stayed flat: the loop was blocked, the model was not slow.")


def _sticky(d: dict[str, Any]) -> None:
    print(f"Drill 2: work pinned to the connection's worker ({d['gateway_worker']} holds "
          f"the connection; idle: {', '.join(d['idle_workers'])})")
    print(f"  {'path':<8}{'task':<7}{'ran on':<8}{'queue wait':>11}{'dispatch':>10}"
          f"{'1st event':>11}{'total':>9}")
    for path, rows in d["phases"].items():
        for r in rows:
            print(f"  {path:<8}{r['kind']:<7}{r['executed_by']:<8}"
                  f"{_s(r['queue_wait_seconds']):>11}{_s(r['dispatch_seconds']):>10}"
                  f"{_s(r['first_event_at_client_seconds']):>11}{_s(r['total_seconds']):>9}")
    print("  claims (worker/outcome): " + _counts(d["claims"]))
    print("  dispatch path (worker/path): " + _counts(d["dispatch_paths"]))
    print("  events projected to the connection (worker/outcome): " + _counts(d["events"]))
    print("  stage histograms (count, mean) by worker/kind:")
    for stage, rows in d["stage_histograms"].items():
        cells = ", ".join(f"{k} {v['count']}x {v['sum_seconds'] / max(1, v['count']):.3f}s"
                          for k, v in rows.items())
        print(f"    {stage:<12}{cells or '-'}")
    waits, owner = d["short_dispatch_seconds"], d["short_task_owner"]
    print(f"  -> local-only: the short task's dispatch ({_s(waits['local'])}) dwarfs its "
          f"{d['short_seconds']:.1f}s model call: it waited")
    print(f"     for {owner['local']}, the connection's worker, not for the model. Global "
          f"claim: idle {owner['claim']}")
    print(f"     claimed the queued job and started it after {_s(waits['claim'])}.")


def _chart(d: dict[str, Any]) -> None:
    """Busy slots per 0.5 s column (the last sample in each), kills marked under them."""
    cols: dict[int, dict[str, Any]] = {}
    for s in d["timeline"]:
        cols[int(s["t"] / COLUMN_SECONDS)] = s
    width = max(cols, default=-1) + 1
    kills = {int(k["t"] / COLUMN_SECONDS) for k in d["kills"]}

    def row(key: str) -> str:
        return "".join(str(min(9, round(cols[i][key]))) if i in cols else " "
                       for i in range(width))

    print(f"  busy slots, one column per {COLUMN_SECONDS} s (limit {d['limit']}):")
    print("    counter " + row("counter_busy"))
    print("    leases  " + row("leases_busy"))
    print("    kills   " + "".join("x" if i in kills else " " for i in range(width)).rstrip())


def _quota(d: dict[str, Any]) -> None:
    c, le = d["counter"], d["leases"]
    print(f"Drill 3: quota holders crash without releasing (limit {d['limit']}, leases on "
          f"{d['backend']}, heartbeat timeout {d['lease_timeout_seconds']:.0f}s)")
    _chart(d)
    print(f"  anonymous counter: leaked {c['leaked_slots']} slot(s), {c['free_at_end']} free at "
          f"the end; busy {c['busy_slots_before']:.1f} before kills -> "
          f"{c['busy_slots_after']:.1f} after")
    print(f"  leases           : {le['ghost_leases']} ghosts left by kills, {le['reaped']} reaped, "
          f"{le['ghosts_left']} left; busy {le['busy_slots_before']:.1f} -> "
          f"{le['busy_slots_after']:.1f}")
    print("  -> nobody knows whose counter slot leaked; a lease names its holder and expires")
    print("     when the heartbeat stops, so the next acquire reclaims it.")


SECTIONS: dict[str, tuple[Callable[[dict[str, Any]], None], Callable[[dict[str, Any]], str]]] = {
    "frozen_worker": (_frozen, _summary_frozen),
    "sticky_connection": (_sticky, _summary_sticky),
    "quota_leak": (_quota, _summary_quota),
}


def summary(result: dict[str, Any]) -> list[str]:
    """One line per drill that ran: the cause, named."""
    return [f"{i}. {SECTIONS[key][1](d)}" for i, (key, d) in
            enumerate(result["drills"].items(), 1)]


def print_text(result: dict[str, Any]) -> None:
    for i, (key, d) in enumerate(result["drills"].items()):
        if i:
            print()
        SECTIONS[key][0](d)
    print(f"\nSummary ({result['workers']} workers, {result['duration_seconds']:.0f}s):")
    for line in result["summary"]:
        print("  " + line)
