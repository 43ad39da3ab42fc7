"""Per-call overhead of ``OffloadAdapter.run`` vs ``asyncio.to_thread`` on the same pool.

Both variants run a trivial callable through a thread pool of the same size, with the
same number of concurrent callers, so the difference is the adapter's bookkeeping (slot
queue, shielded operation task, metrics). Variants are interleaved per round; medians of
per-round ratios are printed.

    python bench/offload_bench.py [--rounds 11] [--calls 4000] [--limit 4]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor

from prometheus_client import CollectorRegistry

from corevo_obs.offload import OffloadAdapter


def _work(i: int) -> int:
    return i


def _round(variant: str, calls: int, limit: int) -> float:
    async def main() -> float:
        pool = ThreadPoolExecutor(max_workers=limit)
        loop = asyncio.get_running_loop()
        loop.set_default_executor(pool)
        adapter = OffloadAdapter(
            name="bench", max_in_flight=limit, max_waiting=calls, wait_timeout=None,
            registry=CollectorRegistry(), worker="bench", executor=pool,
        )
        slots = asyncio.Semaphore(limit)

        async def bare(i: int) -> int:
            async with slots:  # the same concurrency, without the adapter's semantics
                return await asyncio.to_thread(_work, i)

        call: Callable[[int], Awaitable[int]] = (
            bare if variant == "to_thread" else (lambda i: adapter.run(_work, i))
        )
        t0 = time.perf_counter()
        await asyncio.gather(*(call(i) for i in range(calls)))
        elapsed = time.perf_counter() - t0
        await adapter.aclose()
        pool.shutdown()
        return elapsed / calls

    gc.collect()
    return asyncio.run(main())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--calls", type=int, default=4000)
    ap.add_argument("--limit", type=int, default=4)
    args = ap.parse_args()
    per: dict[str, list[float]] = {"to_thread": [], "adapter": []}
    ratios = []
    for r in range(args.rounds):
        order = ["to_thread", "adapter"] if r % 2 == 0 else ["adapter", "to_thread"]
        got = {v: _round(v, args.calls, args.limit) for v in order}
        for v, t in got.items():
            per[v].append(t)
        ratios.append(got["adapter"] / got["to_thread"])
    print(f"{args.rounds} interleaved rounds x {args.calls} calls, limit {args.limit}; medians")
    for v, ts in per.items():
        print(f"{v:<10}{statistics.median(ts) * 1e6:>9.1f} µs/call")
    print(f"adapter / (semaphore + to_thread): {statistics.median(ratios):.2f}x")


if __name__ == "__main__":
    main()
