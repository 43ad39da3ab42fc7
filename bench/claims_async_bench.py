"""Before/after for issue 24: job claims called in ``async def`` on the sync store vs
awaited on the async store — the loop's worst lag and the claim throughput.

Each round creates ``--claims`` queued jobs and claims them all at once (``gather``),
while ``LoopLagSampler`` (2 ms interval) measures the loop. With ``--writer`` another
client holds the database's write lock (SQLite) / the rows (PostgreSQL) for that many
seconds at the start of each round: the wait a busy database imposes, which the sync
store spends on the loop's thread. Variants are interleaved per round; medians printed.

    python bench/claims_async_bench.py [--rounds 7] [--claims 200] [--writer 0.2]
                                       [--pg DSN]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

from prometheus_client import CollectorRegistry

from corevo_obs.claims import (
    AsyncJobStore,
    AsyncPostgresJobStore,
    AsyncSqliteJobStore,
    JobStore,
    PostgresJobStore,
    SqliteJobStore,
)
from corevo_obs.loop import LoopLagSampler


def _writer(dialect: str, target: str, table: str, seconds: float,
            ready: threading.Event) -> None:
    """Another client holding what the claims need for ``seconds``."""
    if dialect == "sqlite":
        db = sqlite3.connect(target, isolation_level=None)
        db.execute("BEGIN IMMEDIATE")
        ready.set()
        time.sleep(seconds)
        db.execute("COMMIT")
        db.close()
        return
    import psycopg

    with psycopg.connect(target) as conn:
        conn.execute(f"UPDATE {table} SET payload = 'held' WHERE state = 'queued'")
        ready.set()
        time.sleep(seconds)
        conn.commit()


async def _round(store: JobStore | AsyncJobStore, jobs: list[str], dialect: str,
                 target: str, writer: float) -> tuple[float, float]:
    """(worst loop lag in s, claims per second) for one gather of claims."""
    ready = threading.Event()
    hold = threading.Thread(target=_writer, args=(dialect, target, store.table, writer, ready))
    if writer:
        hold.start()
        await asyncio.to_thread(ready.wait, 10)
    sampler = LoopLagSampler(interval=0.002, worker="bench", registry=CollectorRegistry())
    sampler.start()
    await asyncio.sleep(0.01)

    async def one(job: str) -> bool:
        if isinstance(store, AsyncJobStore):
            return (await store.claim(job)).won
        return store.claim(job).won        # noqa: COB111 - the "before" being measured

    t0 = time.perf_counter()
    won = sum(await asyncio.gather(*(one(j) for j in jobs)))
    took = time.perf_counter() - t0
    await asyncio.sleep(0.02)              # the tick spanning a stall ends after it
    await sampler.aclose()
    if writer:
        await asyncio.to_thread(hold.join)
    assert won == len(jobs), f"{won} of {len(jobs)} claims won"
    return sampler.max_lag, len(jobs) / took


def run(dialect: str, target: str, rounds: int, claims: int, writer: float) -> None:
    table = f"bench_{uuid.uuid4().hex[:8]}"
    registry = CollectorRegistry()
    sync_make = SqliteJobStore if dialect == "sqlite" else PostgresJobStore
    async_make = AsyncSqliteJobStore if dialect == "sqlite" else AsyncPostgresJobStore
    sync = sync_make(target, table=table, worker="bench", registry=registry)
    got: dict[str, list[tuple[float, float]]] = {"sync-in-async": [], "async": []}

    async def measure(variant: str, jobs: list[str]) -> tuple[float, float]:
        if variant == "sync-in-async":
            return await _round(sync, jobs, dialect, target, writer)
        store = async_make(target, table=table, worker="bench", registry=registry)
        await store.setup()
        try:
            return await _round(store, jobs, dialect, target, writer)
        finally:
            await store.aclose()

    try:
        for r in range(rounds):
            order = list(got) if r % 2 == 0 else list(reversed(got))
            for variant in order:
                jobs = [sync.create_job() for _ in range(claims)]
                got[variant].append(asyncio.run(measure(variant, jobs)))
    finally:
        if dialect == "postgres":
            sync.db.run(f"DROP TABLE IF EXISTS {table}", {})
        sync.close()
    print(f"{dialect}: {rounds} interleaved rounds x {claims} concurrent claims, "
          f"writer {writer:.2f} s; medians")
    lag = {v: statistics.median(x[0] for x in xs) for v, xs in got.items()}
    rate = {v: statistics.median(x[1] for x in xs) for v, xs in got.items()}
    for v in got:
        print(f"  {v:<14} max loop lag {lag[v] * 1000:8.1f} ms   {rate[v]:8.0f} claims/s")
    print(f"  max loop lag sync-in-async / async: {lag['sync-in-async'] / lag['async']:.1f}x; "
          f"throughput async / sync-in-async: {rate['async'] / rate['sync-in-async']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--claims", type=int, default=200)
    ap.add_argument("--writer", type=float, default=0.0,
                    help="seconds another client holds the lock at each round's start")
    ap.add_argument("--pg", metavar="DSN", help="also measure PostgreSQL at DSN")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run("sqlite", str(Path(tmp) / "jobs.db"), args.rounds, args.claims, args.writer)
    if args.pg:
        run("postgres", args.pg, args.rounds, args.claims, args.writer)


if __name__ == "__main__":
    main()
