"""A worker whose loop is made late on purpose, one cause per mode; reports what was said.

Usage: cause_worker.py MODE [--seconds S] [--count N] [--modules DIR] [--wait-go]

Modes: blocking (time.sleep in a handler), gc (gc.collect over a big graph), gil (a
pure-Python busy thread that keeps the GIL 250 ms at a time), starved (an idle loop at
nice 19; the test pins it and CPU hogs to one core), throttled (a loop busy
in 1 ms steps inside a CPU-quota cgroup the test moved it into), import (first imports
of slow modules from DIR), quiet (an idle loop). ``--wait-go`` waits for a line on stdin
before starting (the test moves the process into its cgroup first). The last stdout line
is JSON: the reports, the injection windows (wall clock) and the stall counters (before
it, ``--wait-go`` prints ``ready``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib
import json
import logging
import os
import sys
import threading
import time
from typing import Any

from prometheus_client import CollectorRegistry

from corevo_obs.loop import install_loop_health

Windows = list[tuple[float, float]]


async def handler_sleeps(seconds: float) -> None:
    time.sleep(seconds)  # noqa: ASYNC251 BLOCKING-LINE: the injected blocking call


async def handler_collects() -> None:
    gc.collect()  # GC-LINE


async def handler_imports(name: str) -> None:
    importlib.import_module(name)  # IMPORT-LINE: a first import, on the loop


def busy_python(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        for i in range(1000):
            x += i


async def burn(until: float) -> None:
    """CPU on the loop in 1 ms steps: busy, but never blocking it for long."""
    while time.monotonic() < until:
        step = time.perf_counter() + 0.001
        while time.perf_counter() < step:
            pass
        await asyncio.sleep(0)


def starve(nice: int = 19) -> None:
    """Every thread at the lowest ordinary priority on its core: wake-up preemption keeps
    an idle loop responsive among equal-priority hogs (measured: no stall with 1-6 of
    them); at nice 19 it waits its turn behind them, fractions of a second at a time
    (SCHED_IDLE starved it for minutes). ``nice=0`` puts the threads back (root)."""
    for t in threading.enumerate():
        if t.native_id is not None:
            with contextlib.suppress(PermissionError):
                os.setpriority(os.PRIO_PROCESS, t.native_id, nice)


async def inject(ns: argparse.Namespace, windows: Windows) -> None:
    mode, count = ns.mode, ns.count
    if mode == "blocking":
        for _ in range(count):
            await asyncio.sleep(0.15)
            t0 = time.time()
            await handler_sleeps(0.2)
            windows.append((t0, time.time()))
    elif mode == "gc":
        for _ in range(count):
            await asyncio.sleep(0.15)
            t0 = time.time()
            await handler_collects()
            windows.append((t0, time.time()))
    elif mode == "import":
        for i in range(count):
            await asyncio.sleep(0.15)
            t0 = time.time()
            await handler_imports(f"cause_slow_{i}")
            windows.append((t0, time.time()))
    elif mode == "gil":
        stop = threading.Event()
        busy = threading.Thread(target=busy_python, args=(stop,), name="busy-python")
        busy.start()
        sys.setswitchinterval(0.25)  # after start(): its handshake would block the loop
        t0 = time.time()
        await asyncio.sleep(ns.seconds)
        stop.set()
        await asyncio.to_thread(busy.join)
        sys.setswitchinterval(0.005)
        windows.append((t0, time.time()))
    elif mode == "throttled":
        t0 = time.time()
        await burn(time.monotonic() + ns.seconds)
        windows.append((t0, time.time()))
    else:  # starved, quiet: an idle loop
        if mode == "starved":
            starve()
        t0 = time.time()
        await asyncio.sleep(ns.seconds)
        windows.append((t0, time.time()))
        if mode == "starved":
            starve(0)


async def main(ns: argparse.Namespace) -> dict[str, Any]:
    registry = CollectorRegistry()
    if ns.mode == "gc":
        graph = [[i, {"n": i}] for i in range(1_500_000)]  # ~3M tracked containers
    health = install_loop_health(registry=registry, worker="c0", interval=0.02,
                                 log_interval=0)
    await asyncio.sleep(0.3)  # the first beats carry the readings stalls are measured from
    windows: Windows = []
    await inject(ns, windows)
    await asyncio.sleep(0.3)
    await health.aclose()
    if ns.mode == "gc":
        del graph
    by_cause = {
        s.labels["cause"]: s.value
        for m in registry.collect() if m.name == "corevo_event_loop_stalls_by_cause"
        for s in m.samples if s.name.endswith("_total")
    }
    return {
        "mode": ns.mode,
        "pid": os.getpid(),
        "reports": [r.as_dict() | {"headline": r.headline(), "text": r.format()}
                    for r in health.reports],
        "windows": windows,
        "stalls_total": registry.get_sample_value(
            "corevo_event_loop_stalls_total", {"worker": "c0"}),
        "by_cause": by_cause,
    }


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=("blocking", "gc", "gil", "starved", "throttled",
                                    "import", "quiet"))
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--count", type=int, default=10)
    p.add_argument("--modules")
    p.add_argument("--wait-go", action="store_true")
    ns = p.parse_args()
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if ns.modules:
        sys.path.insert(0, ns.modules)
    if ns.wait_go:
        print("ready", flush=True)  # imported and waiting (the last line is still the JSON)
        sys.stdin.readline()
    print(json.dumps(asyncio.run(main(ns))), flush=True)
