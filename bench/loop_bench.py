"""Busy-loop throughput with loop health installed vs without (issue 2 target: <= 1 % loss).

A workload of many tiny tasks runs on a fresh loop per round; variants are interleaved and
the medians of per-round ratios are printed. Two baselines: bare, and bare plus one idle
pending timer (any real service has some; a pending timer alone shifts a call_soon-heavy
loop by a few percent, which is not the suite's doing).

    python bench/loop_bench.py [--rounds 15] [--tasks 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time

from prometheus_client import CollectorRegistry

from corevo_obs import install_loop_health


async def _tiny(n: int) -> int:
    for _ in range(n):
        await asyncio.sleep(0)
    return n


async def _workload(tasks: int) -> None:
    batch = 500
    for _ in range(tasks // batch):
        await asyncio.gather(*(_tiny(3) for _ in range(batch)))


def _round(tasks: int, variant: str) -> float:
    async def main() -> float:
        health = None
        idle = None
        if variant == "instrumented":
            health = install_loop_health(registry=CollectorRegistry(), worker="bench")
        elif variant == "timer":
            idle = asyncio.get_running_loop().call_later(3600, lambda: None)
        await asyncio.sleep(0.05)  # let the sampler settle into its rhythm
        t0 = time.perf_counter()
        await _workload(tasks)
        elapsed = time.perf_counter() - t0
        if health is not None:
            await health.stop()
        if idle is not None:
            idle.cancel()
        return elapsed

    gc.collect()
    return asyncio.run(main())


def _median_ratio(a: list[float], b: list[float]) -> float:
    """Median of per-round ratios: robust to the machine drifting between rounds."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--tasks", type=int, default=20000)
    ns = p.parse_args()
    variants = ("bare", "timer", "instrumented")
    times: dict[str, list[float]] = {v: [] for v in variants}
    _round(ns.tasks, "bare")  # warm-up
    for i in range(ns.rounds):
        order = variants if i % 2 == 0 else tuple(reversed(variants))
        for v in order:
            times[v].append(_round(ns.tasks, v))
    med = {v: statistics.median(t) for v, t in times.items()}
    r_bare = _median_ratio(times["instrumented"], times["bare"])
    r_timer = _median_ratio(times["instrumented"], times["timer"])
    print(f"tasks per round: {ns.tasks} (x3 awaits), rounds: {ns.rounds}")
    for v in variants:
        print(f"  {v:13s} median {med[v] * 1000:8.1f} ms  ({ns.tasks / med[v]:,.0f} tasks/s)")
    print(f"instrumented / bare        time ratio {r_bare:.4f}  -> throughput loss "
          f"{(1 - 1 / r_bare) * 100:+.2f} %")
    print(f"instrumented / bare+timer  time ratio {r_timer:.4f}  -> throughput loss "
          f"{(1 - 1 / r_timer) * 100:+.2f} %")
    print("target: loss <= 1 % at default settings (interval 20 ms, watchdog 50 ms / 100 ms)")


if __name__ == "__main__":
    main()
