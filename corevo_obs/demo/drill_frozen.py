"""Drill 1: one worker runs a sync HTTP call inside ``async def``; who froze, and where?"""

from __future__ import annotations

import time
from typing import Any

from .context import DemoContext
from .scrape import HeartbeatWatch
from .slow_upstream import SlowUpstream

RESULT_TIMEOUT = 60.0
SCRAPE_EVERY = 0.05


def project_chain(stall: dict[str, Any]) -> list[str]:
    """The host's own frames of a stall, outermost first, from the task the loop was
    running down to the blocking call (``file:line:function``): where the ``async def``
    that should have awaited sits, not only the innermost line."""
    frames, project = stall["frames"], set(stall.get("project_frames", ()))
    start = max((i for i, f in enumerate(frames)
                 if f.rsplit(":", 2)[0].endswith("asyncio/events.py")), default=-1)
    return [f for f in frames[start + 1:] if f in project]


def run(ctx: DemoContext) -> dict[str, Any]:
    freeze = 0.8 if ctx.short else 1.5
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
        ctx.progress.status(f"scraping {bad}'s /metrics while it runs persist_artifact")
        watch = HeartbeatWatch(ports[bad])
        while procs[bad].proc.poll() is None:
            watch.poll()
            time.sleep(SCRAPE_EVERY)
        results = {n: ctx.children.result(c, RESULT_TIMEOUT) for n, c in procs.items()}
    for n, r in results.items():
        r["scraped_heartbeat_max_age_seconds"] = round(watch.max_age.get(n, 0.0), 3)
    frozen = [n for n, r in results.items() if r["stalls"]]
    diagnosis: dict[str, Any] = {"injected_worker": bad, "offloaded_worker": fixed,
                                 "freeze_seconds": freeze, "scraped_worker": bad,
                                 "scrape_every_seconds": SCRAPE_EVERY,
                                 "frozen_workers": frozen}
    if frozen:
        worst = max((s for n in frozen for s in results[n]["stalls"]),
                    key=lambda s: s["duration_seconds"])
        name = worst["worker"]
        diagnosis["stall"] = worst
        diagnosis["call_chain"] = project_chain(worst)
        calm = [r for n, r in results.items() if n not in frozen]
        diagnosis["heartbeat_age_seconds"] = results[name]["scraped_heartbeat_max_age_seconds"]
        diagnosis["scrapes_answered_while_frozen"] = watch.answered_frozen.get(name, 0)
        diagnosis["max_lag_seconds"] = results[name]["max_lag_seconds"]
        diagnosis["healthy_heartbeat_max_gap_seconds"] = max(
            (r["heartbeat_max_gap_seconds"] for r in calm), default=None)
    diagnosis["workers"] = results
    if frozen:
        also = [n for n in frozen if n != name]
        ctx.progress.done(f"{name} froze {worst['duration_seconds']:.2f}s"
                          + (f" (brief stalls also on {', '.join(also)})" if also else ""))
    else:
        ctx.progress.done("no stall detected")
    return diagnosis
