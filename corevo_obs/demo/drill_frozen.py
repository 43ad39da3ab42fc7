"""Drill 1: one worker runs a sync HTTP call inside ``async def``; who froze, and where?"""

from __future__ import annotations

import time
from typing import Any

from .context import DemoContext
from .scrape import HeartbeatWatch
from .slow_upstream import SlowUpstream

RESULT_TIMEOUT = 60.0
SCRAPE_EVERY = 0.05


def run(ctx: DemoContext) -> dict[str, Any]:
    freeze = 0.4 if ctx.short else 1.5
    ctx.progress.step(f"sync I/O inside async def ({ctx.workers} workers, "
                      f"one blocks {freeze:.1f}s)")
    with SlowUpstream(freeze) as upstream:
        names = [f"w{i}" for i in range(ctx.workers)]
        bad = names[1 % ctx.workers]
        fixed = names[2] if ctx.workers > 2 else None  # the same call, offloaded
        procs = {
            n: ctx.children.spawn(
                n, *(ctx.port_args(i) or ["--metrics-port", "0"]),
                *(["--blocking-url", upstream.url] if n == bad else []),
                *(["--offload-url", upstream.url] if n == fixed else []))
            for i, n in enumerate(names)
        }
        ports = {n: int(ctx.children.ready(c)["metrics_port"]) for n, c in procs.items()}
        ctx.progress.status(f"scraping {bad}'s endpoint while it runs persist_artifact")
        watch = HeartbeatWatch(ports[bad], bad)
        while procs[bad].proc.poll() is None:
            watch.poll()
            time.sleep(SCRAPE_EVERY)
        results = {n: ctx.children.result(c, RESULT_TIMEOUT) for n, c in procs.items()}
    frozen = [n for n, r in results.items() if r["stalls"]]
    diagnosis: dict[str, Any] = {"injected_worker": bad, "offloaded_worker": fixed,
                                 "frozen_workers": frozen}
    if frozen:
        worst = max((s for n in frozen for s in results[n]["stalls"]),
                    key=lambda s: s["duration_seconds"])
        diagnosis["stall"] = worst
        bad_r = results[worst["worker"]]
        calm = [r for n, r in results.items() if n not in frozen]
        diagnosis["heartbeat_age_seconds"] = round(watch.max_age, 3)
        diagnosis["scrapes_answered_while_frozen"] = watch.answered_frozen
        diagnosis["max_lag_seconds"] = bad_r["max_lag_seconds"]
        diagnosis["healthy_heartbeat_max_gap_seconds"] = max(
            (r["heartbeat_max_gap_seconds"] for r in calm), default=None)
    diagnosis["workers"] = results
    ctx.progress.done(f"frozen: {', '.join(frozen) or 'none'}")
    return diagnosis
