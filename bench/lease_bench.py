"""Lease acquire+release round trips per second: instrumented store vs the bare Lua script.

Both variants run the same ACQUIRE_LUA + RELEASE_LUA scripts against the same private
redis-server, in interleaved rounds (order alternating), and the medians are compared in
this run; the ratio is the cost of the instrumentation (timing, observer, metrics, holder ids, the
Lease handle). Client and server are pinned to different CPUs when the machine has two.

    python bench/lease_bench.py [--rounds 15] [--pairs 2000] [--tasks 64] [--url URL]
                                [--instructions] [--multiprocess]

Wall time on a shared 2-core machine swings by ±25 %; ``--instructions`` adds exact
client instruction counts per pair (callgrind, startup subtracted), an upper bound on the
client-side share of the overhead. ``--multiprocess`` runs the same with
``PROMETHEUS_MULTIPROC_DIR`` set (a fresh temporary directory): values are mmap-backed
and the observer takes its general path.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import callgrind  # bench/callgrind.py, beside this script
import redis
import redis.asyncio
from prometheus_client import CollectorRegistry

from corevo_obs.leases import AsyncRedisLeaseStore, RedisLeaseStore
from corevo_obs.leases.redis_store import (
    ACQUIRE_LUA,
    CONNECT_TIMEOUT,
    RELEASE_LUA,
    SOCKET_TIMEOUT,
    quota_keys,
)
from corevo_obs.observer import MetricsObserver

LIMIT, TIMEOUT = 100_000, 30.0
# The stores' own client options (short timeouts for fail-closed), so only the
# instrumentation differs between the variants.
CLIENT: dict[str, Any] = {
    "socket_connect_timeout": CONNECT_TIMEOUT, "socket_timeout": SOCKET_TIMEOUT,
}


def start_redis() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
           "--appendonly", "no"]
    if (os.cpu_count() or 1) >= 2 and shutil.which("taskset"):
        cmd = ["taskset", "-c", "1", *cmd]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    client.close()
    return proc, f"redis://127.0.0.1:{port}/0"


VARIANTS = ("bare", "instrumented")


def sync_variants(url: str) -> dict[str, Callable[[int], None]]:
    bare_client = redis.Redis.from_url(url, **CLIENT)
    script = bare_client.register_script(ACQUIRE_LUA)
    release = bare_client.register_script(RELEASE_LUA)
    store = RedisLeaseStore("bench", url, limit=LIMIT, timeout=TIMEOUT, worker="bench",
                            registry=CollectorRegistry(), key="corevo:lease:bench-i")
    store.declare_fresh()  # a private server: no restart fence
    keys = quota_keys("bench", "corevo:lease:bench-b")
    bare_client.set(keys[1], "0")
    bare_client.set(keys[3], bare_client.info("server")["run_id"])

    def bare(n: int) -> None:
        for i in range(n):
            holder = f"bare#{i}"
            script(keys=keys, args=[TIMEOUT, LIMIT, holder])
            release(keys=keys[:1], args=[TIMEOUT, holder])

    def instrumented(n: int) -> None:
        for _ in range(n):
            lease = store.acquire()
            assert lease is not None
            lease.release()

    return {"bare": bare, "instrumented": instrumented}


def async_variants(url: str, tasks: int) -> dict[str, Callable[[int], Awaitable[None]]]:
    bare_client = redis.asyncio.Redis.from_url(url, **CLIENT)
    script = bare_client.register_script(ACQUIRE_LUA)
    release = bare_client.register_script(RELEASE_LUA)
    store = AsyncRedisLeaseStore("bench", url, limit=LIMIT, timeout=TIMEOUT, worker="bench",
                                 registry=CollectorRegistry(), key="corevo:lease:bench-ai")
    keys = quota_keys("bench", "corevo:lease:bench-ab")
    fresh = redis.Redis.from_url(url, **CLIENT)   # no restart fence on a private server
    run = fresh.info("server")["run_id"]
    fresh.set(store.marker_key, "0")
    fresh.set(store.run_key, run)
    fresh.set(keys[1], "0")
    fresh.set(keys[3], run)
    fresh.close()

    async def bare_task(n: int, t: int) -> None:
        for i in range(n):
            holder = f"bare#{t}.{i}"
            await script(keys=keys, args=[TIMEOUT, LIMIT, holder])
            await release(keys=keys[:1], args=[TIMEOUT, holder])

    async def inst_task(n: int, t: int) -> None:
        for _ in range(n):
            lease = await store.acquire()
            assert lease is not None
            await lease.release()

    def fan_out(task: Callable[[int, int], Awaitable[None]]) -> Callable[[int], Awaitable[None]]:
        async def run(n: int) -> None:
            await asyncio.gather(*(task(n // tasks, t) for t in range(tasks)))
        return run

    return {"bare": fan_out(bare_task), "instrumented": fan_out(inst_task)}


def observer_pairs(n: int) -> None:
    """The observer alone (no Redis): ``n`` acquire and release reports."""
    obs = MetricsObserver(worker="bench", registry=CollectorRegistry())
    acquired, released = obs.lease_acquired, obs.lease_released
    for _ in range(n):
        acquired("bench", "granted", reaped=0, held=3, limit=LIMIT, seconds=0.0004)
        released("bench", "released", 0.002)


def measure(variants: dict[str, Callable[[int], Any]], rounds: int, pairs: int,
            run: Callable[[Any], Any]) -> dict[str, dict[str, float]]:
    """Median pairs/s (wall) and client CPU µs per pair, per variant.

    The CPU figure is the steadier one on a shared machine: other processes stretch wall
    time, much less this process's own CPU time.
    """
    names = list(variants)
    rates: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for name in names:  # warm-up: scripts loaded, connections open
        run(variants[name](min(pairs, 200)))
    for r in range(rounds):
        for name in names if r % 2 == 0 else reversed(names):
            t0, c0 = time.perf_counter(), time.process_time()
            run(variants[name](pairs))
            rates[name].append(pairs / (time.perf_counter() - t0))
            cpu[name].append((time.process_time() - c0) / pairs * 1e6)
    return {n: {"pairs_per_s": statistics.median(rates[n]),
                "client_cpu_us": statistics.median(cpu[n])} for n in names}


def callgrind_instructions(url: str, variant: str, pairs: int) -> int:
    """Instructions this client executes for ``pairs`` sync pairs (startup included)."""
    argv = [__file__, "--url", url, "--only", variant, "--pairs", str(pairs)]
    return callgrind.instructions(argv)[0]


def instructions_per_pair(url: str, pairs: int) -> dict[str, float]:
    """(I(2n) - I(n)) / n per variant: exact and repeatable, startup cancels out."""
    return {v: (callgrind_instructions(url, v, 2 * pairs) - callgrind_instructions(url, v, pairs))
            / pairs for v in (*VARIANTS, "observer")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--tasks", type=int, default=64)
    ap.add_argument("--url")
    ap.add_argument("--instructions", action="store_true",
                    help="also count client instructions per sync pair under callgrind")
    ap.add_argument("--multiprocess", action="store_true",
                    help="metrics in prometheus_client multiprocess (mmap) mode")
    ap.add_argument("--only", help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.multiprocess and "PROMETHEUS_MULTIPROC_DIR" not in os.environ:
        # prometheus_client picks its value class at import: set the directory, re-exec.
        with tempfile.TemporaryDirectory() as tmp:
            env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": tmp}
            sys.exit(subprocess.run([sys.executable, __file__, *sys.argv[1:]],
                                    env=env).returncode)
    if ns.only:  # one untimed run of one variant (what callgrind measures)
        if ns.only == "observer":
            observer_pairs(ns.pairs)
        else:
            sync_variants(ns.url)[ns.only](ns.pairs)
        return
    server = None
    url = ns.url
    if url is None:
        server, url = start_redis()
    if (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {0})
    try:
        loop = asyncio.new_event_loop()
        results: dict[str, Any] = {
            "sync": measure(sync_variants(url), ns.rounds, ns.pairs, lambda x: x),
            f"async x{ns.tasks}": measure(async_variants(url, ns.tasks), ns.rounds,
                                          ns.pairs // ns.tasks * ns.tasks,
                                          loop.run_until_complete),
        }
        loop.close()
        observer = measure({"observer": observer_pairs}, ns.rounds, ns.pairs * 10, lambda x: x)
        if ns.instructions and callgrind.available():
            per_pair = instructions_per_pair(url, 300)
            extra = per_pair["instrumented"] / per_pair["bare"] - 1
            results["callgrind"] = {"instructions_per_pair": per_pair, "extra": extra}
    finally:
        if server is not None:
            server.terminate()
            server.wait()
    report: dict[str, Any] = {}
    cg = results.pop("callgrind", None)
    for mode, med in results.items():
        bare = med["bare"]
        row: dict[str, Any] = {"bare": bare}
        line = f"{mode:>10}: bare {bare['pairs_per_s']:7.0f}/s {bare['client_cpu_us']:5.1f} µs cpu"
        for v in VARIANTS[1:]:
            inst = med[v]
            ratio = inst["pairs_per_s"] / bare["pairs_per_s"]
            extra_cpu = inst["client_cpu_us"] - bare["client_cpu_us"]
            # Extra client CPU per pair as a share of one bare round trip: the throughput
            # the instrumentation can cost at most when the client is the bottleneck.
            cpu_share = extra_cpu * bare["pairs_per_s"] / 1e6
            row[v] = {**inst, "wall_ratio": round(ratio, 4),
                      "extra_client_cpu_us": round(extra_cpu, 2),
                      "cpu_overhead": round(cpu_share, 4)}
            line += (f" | {v} {inst['pairs_per_s']:7.0f}/s, wall ratio {ratio:.3f},"
                     f" extra cpu {extra_cpu:+.1f} µs = {cpu_share:+.1%}")
        report[mode] = row
        print(line)
    obs_us = 1e6 / observer["observer"]["pairs_per_s"]
    report["observer"] = {"us_per_pair": round(obs_us, 3)}
    print(f"  observer: acquire+release reports alone {obs_us:.2f} µs per pair")
    if cg is not None:
        ipp = cg["instructions_per_pair"]
        print(f" callgrind: bare {ipp['bare']:,.0f} instr/pair | instrumented "
              f"{ipp['instrumented']:,.0f} ({cg['extra']:+.1%}) | observer alone "
              f"{ipp['observer']:,.0f}")
        report["callgrind"] = cg
    print(json.dumps({"rounds": ns.rounds, "pairs": ns.pairs,
                      "multiprocess": "PROMETHEUS_MULTIPROC_DIR" in os.environ,
                      "results": report}))


if __name__ == "__main__":
    main()
