"""Alert precision: a healthy run fires nothing, each fault fires its own alert only.

The example app under gunicorn (3 uvicorn workers, gunicorn's default 30 s timeout),
under a steady request mix with a CPU-hog neighbour, scraped every 5 s by a real
Prometheus evaluating the shipped rules unchanged (tests/precision.py). First a healthy
run (default 180 s), then each fault on a fresh stack; a markdown table goes to stdout
(docs/dashboards.md carries it). A rule whose ``for`` outlasts the observation shows as
*pending*: its expression held for the right subject, which is what precision is about.

    PYTHONPATH=. python bench/alert_precision_bench.py [--healthy 180] [--only frozen,...]
"""

from __future__ import annotations

import argparse
import functools
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.precision import Load, Seen, Stack, hogs, stack, stalled_worker


@dataclass
class Fault:
    name: str
    expected: str
    freeze: float
    inject: Callable[[Stack], None]
    observe: float
    truth: Callable[[Stack], str]
    #: gunicorn's worker timeout (None: its default, 30 s)
    timeout: int | None = None


def _report_burst(s: Stack) -> None:
    for _ in range(12):  # 0.4 s blocking sleeps, spread by the kernel over the workers
        s.get("/report")


def _code_stalls(s: Stack) -> str:
    got = s.query('sum by (worker) (increase(corevo_event_loop_stalls_by_cause_total'
                  '{cause=~"blocking|import|gc|gil"}[10m])) >= 3')
    return ",".join(sorted(got)) or "none"


def _host_stalls(s: Stack) -> str:
    got = s.query('sum by (worker) (increase(corevo_event_loop_stalls_by_cause_total'
                  '{cause=~"starved|throttled|unknown"}[10m])) >= 20')
    return ",".join(sorted(got)) or "none"


def _starve(s: Stack) -> None:
    with hogs(6):
        time.sleep(100)


def _freeze(s: Stack) -> None:
    s.get("/freeze", timeout=90)


def _killed(s: Stack) -> str:
    return ",".join(sorted(s.query("corevo_worker_killed_total > 0"))) or "none"


FAULTS = [
    Fault("frozen", "CorevoLoopFrozen", 20.0, _freeze, 35.0,
          lambda s: stalled_worker(s, 18.0) or "no single 18 s stall", timeout=60),
    Fault("killed", "CorevoWorkerTimeoutKilled", 45.0, _freeze, 75.0, _killed),
    Fault("stalls", "CorevoLoopStalls", 15.0, _report_burst, 90.0, _code_stalls),
    Fault("starved", "CorevoLoopStarved", 15.0, _starve, 110.0, _host_stalls),
    Fault("scrape", "CorevoScrapeDown", 15.0, lambda s: s.pause_master(75.0), 80.0,
          lambda s: s.target),
]


def _has(name: str, seen: Seen) -> bool:
    return name in seen.names()


def _subjects(seen: Seen, name: str) -> str:
    hits = [f"{','.join(v for _, v in sub)} ({st})" for (n, sub), st in seen.alerts.items()
            if n == name]
    return "; ".join(sorted(hits)) or "—"


def _others(seen: Seen, name: str, allowed: set[str]) -> str:
    rest = [f"{n} {','.join(v for _, v in sub)} ({st}{', expected' * (n in allowed)})"
            for (n, sub), st in sorted(seen.alerts.items()) if n != name]
    return "; ".join(rest) or "none"


def run(healthy: float, only: set[str] | None) -> None:
    print("| run | expected | fired (state) | ground truth | other alerts | after |")
    print("|---|---|---|---|---|---|")
    if only is None or "healthy" in only:
        with tempfile.TemporaryDirectory() as tmp, stack(Path(tmp)) as s, hogs(1), \
                Load(s.app) as load:
            seen = s.watch(healthy)
            print(f"| healthy {healthy:.0f} s, {load.done} requests ({load.errors} errors), "
                  f"1 CPU hog | none | — | — | {seen.describe()} | — |", flush=True)
    for f in FAULTS:
        if only is not None and f.name not in only:
            continue
        with tempfile.TemporaryDirectory() as tmp, \
                stack(Path(tmp), freeze_seconds=f.freeze, timeout=f.timeout) as s, \
                hogs(1), Load(s.app):
            s.watch(10.0)  # warm: nothing may be pending before the fault
            before = s.seen.describe()
            s.seen = Seen()
            t0 = time.monotonic()
            injector = threading.Thread(target=f.inject, args=(s,), daemon=True)
            injector.start()
            s.watch(f.observe, until=functools.partial(_has, f.expected))
            first = time.monotonic() - t0
            s.watch(max(0.0, f.observe - first))
            injector.join(120)
            after = f"{first:.0f} s" if f.expected in s.seen.names() else "never"
            # the frozen worker's alert comes first in a kill: both are expected there
            allowed = {"CorevoLoopFrozen"} if f.name == "killed" else set()
            print(f"| {f.name} (before: {before}) | {f.expected} | "
                  f"{_subjects(s.seen, f.expected)} | {f.truth(s)} | "
                  f"{_others(s.seen, f.expected, allowed)} | {after} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--healthy", type=float, default=180.0)
    parser.add_argument("--only", default=None,
                        help="comma-separated: healthy,frozen,killed,stalls,starved,scrape")
    args = parser.parse_args()
    run(args.healthy, set(args.only.split(",")) if args.only else None)


if __name__ == "__main__":
    main()
