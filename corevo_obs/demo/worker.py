"""One demo worker process, in one of five roles.

``frozen`` (drill 1) runs a fixed script and prints one JSON summary line. The others run
until SIGTERM/SIGINT (or until their parent dies, so a killed demo leaves no orphan):
``gateway`` and ``executor`` (drill 2), ``holder`` (drill 3) and ``serve`` (keeps a
metrics endpoint up for ``--metrics-port``). They print one JSON "ready" line first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.errors import CorevoObsError
from ..exposition import MetricsServer, enable_multiprocess
from ..loop import install_loop_health
from ..offload import OffloadAdapter
from . import handlers

# the demo is a host app inside this package: its frames are "project" only when said so
DEMO_ROOTS = (os.path.dirname(os.path.abspath(__file__)),)

PARENT_CHECK_SECONDS = 0.5
Role = Callable[[argparse.Namespace, asyncio.Event, Callable[..., None]], Awaitable[None]]


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


async def run_frozen(ns: argparse.Namespace) -> dict[str, object]:
    """Drill 1: background model traffic and a heartbeat around one (maybe blocking) call."""
    health = install_loop_health(worker=ns.worker, interval=0.01, project_roots=DEMO_ROOTS)
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
        async with OffloadAdapter(name="object_store", max_in_flight=4,
                                  worker=ns.worker) as object_store:
            await handlers.persist_artifact(ns.offload_url, object_store)
    drill_seconds = time.monotonic() - drill_started
    await asyncio.sleep(ns.cooldown)
    for t in background:
        t.cancel()
    await asyncio.gather(*background, return_exceptions=True)
    await health.aclose()
    return {
        "worker": ns.worker,
        "pid": os.getpid(),
        "drill_seconds": round(drill_seconds, 4),
        "max_lag_seconds": round(health.sampler.max_lag, 4),
        "heartbeat_every_seconds": beat.every,
        "heartbeat_max_gap_seconds": round(beat.max_gap, 4),
        "model_latency_seconds": ns.model_latency,
        "model_latency_median_seconds": round(statistics.median(latencies), 4)
        if latencies else None,
        "stalls": [r.as_dict() for r in health.reports],
    }


async def run_serve(ns: argparse.Namespace, stop: asyncio.Event,
                    announce: Callable[..., None]) -> None:
    """Keep loop health and some model traffic going so a scrape has live series."""
    traffic = asyncio.create_task(_model_traffic([], ns.model_latency))
    announce()
    await stop.wait()
    traffic.cancel()


async def _watch_parent(parent: int, stop: asyncio.Event) -> None:
    while True:
        await asyncio.sleep(PARENT_CHECK_SECONDS)
        if os.getppid() != parent:  # orphaned: the demo died without stopping us
            stop.set()
            return


async def run_role(ns: argparse.Namespace, role: Role, parent: int) -> None:
    """Common life of a long-running role: health, signals, parent watch, ready line."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    health = install_loop_health(worker=ns.worker, interval=0.01, project_roots=DEMO_ROOTS)
    watch = asyncio.create_task(_watch_parent(parent, stop))

    def announce(**info: Any) -> None:
        print(json.dumps({"ready": True, "worker": ns.worker, "pid": os.getpid(),
                          "metrics_port": ns.metrics_port, **info}), flush=True)

    try:
        await role(ns, stop, announce)
    finally:
        watch.cancel()
        await health.aclose()


def _roles() -> dict[str, Role]:
    from .holder import run_holder
    from .runtime import run_executor, run_gateway

    return {"gateway": run_gateway, "executor": run_executor, "holder": run_holder,
            "serve": run_serve}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--worker", required=True)
    p.add_argument("--role", default="frozen",
                   choices=("frozen", "gateway", "executor", "holder", "serve"))
    p.add_argument("--metrics-port", type=int, default=-1,
                   help="serve /metrics (0: any free port, -1: none)")
    p.add_argument("--metrics-scope", choices=("process", "host"), default="process",
                   help="serve this worker's series, or every worker's (one per host)")
    p.add_argument("--blocking-url")
    p.add_argument("--offload-url")
    p.add_argument("--model-latency", type=float, default=0.05)
    p.add_argument("--warmup", type=float, default=0.5)
    p.add_argument("--cooldown", type=float, default=0.5)
    p.add_argument("--db", help="SQLite file: jobs and events (drill 2), leases (drill 3)")
    p.add_argument("--counter-db", help="SQLite file of drill 3's anonymous counter")
    p.add_argument("--limit", type=int, default=4)
    p.add_argument("--lease-timeout", type=float, default=1.0)
    p.add_argument("--redis")
    p.add_argument("--redis-key")
    p.add_argument("--tasks", type=int, default=2, help="holder tasks per scheme")
    p.add_argument("--hold", type=float, default=0.3, help="seconds a holder keeps a slot")
    return p.parse_args(argv)


def main() -> None:
    ns = parse_args()
    parent = os.getppid()
    try:
        enable_multiprocess()
        if ns.metrics_port >= 0:
            ns.metrics_port = MetricsServer(port=ns.metrics_port,
                                            scope=ns.metrics_scope).start().port
        if ns.role == "frozen":
            if ns.metrics_port >= 0:  # lets the orchestrator scrape us while we freeze
                print(json.dumps({"ready": True, "metrics_port": ns.metrics_port}), flush=True)
            print(json.dumps(asyncio.run(run_frozen(ns))), flush=True)
        else:
            asyncio.run(run_role(ns, _roles()[ns.role], parent))
    except CorevoObsError as exc:
        sys.exit(f"demo worker {ns.worker}: {exc}")
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
