"""Per-request cost of the ASGI middleware vs the bare app and vs
prometheus-fastapi-instrumentator, on one FastAPI app, in the same run.

Issue 16 target: cheaper per request than the instrumentator while recording four
stages (it records one latency histogram, a request counter and sizes). Requests are
driven through the ASGI interface in-process (no sockets), so only the app and its
middleware are measured; variants are interleaved per round and medians printed.
``--instructions`` also counts instructions per request under callgrind (two request
counts, the difference divided by the extra requests), which repeat exactly.

    python bench/middleware_bench.py [--rounds 10] [--requests 3000] [--instructions]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from typing import Any

import callgrind  # bench/callgrind.py, beside this script
from fastapi import FastAPI
from prometheus_client import CollectorRegistry

VARIANTS = ("bare", "corevo", "instrumentator")


def build(variant: str) -> Any:
    app = FastAPI()

    @app.get("/items/{item_id}")
    async def item(item_id: int) -> dict[str, int]:
        return {"item": item_id}

    if variant == "corevo":
        from corevo_obs.integrations.asgi import StagesMiddleware

        app.add_middleware(StagesMiddleware, registry=CollectorRegistry(), worker="bench")
    elif variant == "instrumentator":
        from prometheus_fastapi_instrumentator import Instrumentator

        Instrumentator(registry=CollectorRegistry()).instrument(app)
    return app


async def drive(app: Any, requests: int) -> float:
    """Seconds for ``requests`` sequential GETs through the ASGI interface."""
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        pass

    t0 = time.perf_counter()
    for i in range(requests):
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "GET", "scheme": "http", "path": f"/items/{i % 50}",
            "raw_path": f"/items/{i % 50}".encode(), "query_string": b"", "root_path": "",
            "headers": [(b"host", b"bench")], "client": ("127.0.0.1", 1),
            "server": ("127.0.0.1", 80),
        }
        await app(scope, receive, send)
    return time.perf_counter() - t0



def per_request(variant: str, requests: int) -> float:
    app = build(variant)
    asyncio.run(drive(app, 200))  # warm: route compilation, first-series creation
    gc.collect()
    return asyncio.run(drive(app, requests)) / requests


def timed(rounds: int, requests: int) -> None:
    results: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for _ in range(rounds):
        for v in VARIANTS:
            results[v].append(per_request(v, requests))
    med = {v: statistics.median(xs) for v, xs in results.items()}
    bare = med["bare"]
    print(f"wall time per request, median of {rounds} rounds x {requests} requests")
    for v in VARIANTS:
        print(f"  {v:15s} {med[v] * 1e6:8.1f} us  {1 / med[v]:9.0f} req/s  "
              f"added {(med[v] - bare) * 1e6:7.1f} us")
    ratio = (med["corevo"] - bare) / max(1e-12, med["instrumentator"] - bare)
    print(f"added cost, corevo / instrumentator: {ratio:.2f} (target < 1)")


def counted(small: int, large: int) -> None:
    counts = {}
    for v in VARIANTS:
        a = callgrind.instructions([__file__, "--only", v, "--requests", str(small)])[0]
        b = callgrind.instructions([__file__, "--only", v, "--requests", str(large)])[0]
        counts[v] = (b - a) / (large - small)
    bare = counts["bare"]
    print(f"instructions per request (callgrind, {large} - {small} requests)")
    for v in VARIANTS:
        print(f"  {v:15s} {counts[v]:10.0f}  added {counts[v] - bare:9.0f}")
    ratio = (counts["corevo"] - bare) / max(1.0, counts["instrumentator"] - bare)
    print(f"added instructions, corevo / instrumentator: {ratio:.2f} (target < 1)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--instructions", action="store_true")
    ap.add_argument("--only", help=argparse.SUPPRESS)  # one variant, for callgrind
    args = ap.parse_args()
    if args.only:
        per_request(args.only, args.requests)
        return
    timed(args.rounds, args.requests)
    if args.instructions:
        if not callgrind.available():
            raise SystemExit("valgrind is not installed (apt-get install valgrind)")
        counted(300, 1300)


if __name__ == "__main__":
    main()
