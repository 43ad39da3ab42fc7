"""One demo worker process: loop health, a fake model, an unrelated heartbeat, a drill.

Run by ``corevo_obs.demo.main``; prints one JSON summary line on stdout when done.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

from ..exposition import enable_multiprocess
from ..loop import install_loop_health
from . import handlers


class UnrelatedHeartbeat:
    """A tick that has nothing to do with the drill: if it stalls, the loop stalled."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.max_gap = 0.0

    async def run(self) -> None:
        last = time.monotonic()
        while True:
            await asyncio.sleep(self.every)
            now = time.monotonic()
            self.max_gap = max(self.max_gap, now - last)
            last = now


async def _model_traffic(latencies: list[float], latency: float) -> None:
    while True:
        started = time.monotonic()
        await handlers.fake_model(latency)
        latencies.append(time.monotonic() - started)


async def run_worker(ns: argparse.Namespace) -> dict[str, object]:
    health = install_loop_health(worker=ns.worker, interval=0.01)
    beat = UnrelatedHeartbeat(0.05)
    latencies: list[float] = []
    background = [
        asyncio.create_task(beat.run()),
        asyncio.create_task(_model_traffic(latencies, ns.model_latency)),
    ]
    await asyncio.sleep(ns.warmup)
    drill_started = time.monotonic()
    if ns.blocking_url:
        await handlers.persist_artifact_blocking(ns.blocking_url)
    elif ns.offload_url:
        await handlers.persist_artifact(ns.offload_url)
    drill_seconds = time.monotonic() - drill_started
    await asyncio.sleep(ns.cooldown)
    for t in background:
        t.cancel()
    await asyncio.gather(*background, return_exceptions=True)
    await health.stop()
    return {
        "worker": ns.worker,
        "drill_seconds": round(drill_seconds, 4),
        "max_lag_seconds": round(health.sampler.max_lag, 4),
        "heartbeat_max_gap_seconds": round(beat.max_gap, 4),
        "model_latency_median_seconds": round(statistics.median(latencies), 4)
        if latencies else None,
        "stalls": [r.as_dict() for r in health.reports],
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--worker", required=True)
    p.add_argument("--blocking-url")
    p.add_argument("--offload-url")
    p.add_argument("--model-latency", type=float, default=0.05)
    p.add_argument("--warmup", type=float, default=0.5)
    p.add_argument("--cooldown", type=float, default=0.5)
    ns = p.parse_args()
    enable_multiprocess()
    print(json.dumps(asyncio.run(run_worker(ns))), flush=True)


if __name__ == "__main__":
    main()
