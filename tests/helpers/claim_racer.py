"""One claim racer: its own process, event loop and DB connection.

Usage: claim_racer.py sqlite|postgres TARGET TABLE WORKER N BATCH [async]
Prints its owner id, then for each batch of BATCH jobs waits for a ``go`` line on stdin
(the parent releases both racers together, so every batch is a fresh race), claims the
batch in four strided lanes (each claim in a thread, off the loop; with ``async``, awaited
on the async store) and prints ``done``.
At the end it prints one JSON line: the jobs it won and its own claim counters.
"""

from __future__ import annotations

import asyncio
import json
import sys

from prometheus_client import CollectorRegistry

from corevo_obs.claims import (
    AsyncJobStore,
    AsyncPostgresJobStore,
    AsyncSqliteJobStore,
    ClaimOutcome,
    JobStore,
    PostgresJobStore,
    SqliteJobStore,
)


def open_store(dialect: str, target: str, table: str, worker: str,
               registry: CollectorRegistry) -> JobStore:
    make = SqliteJobStore if dialect == "sqlite" else PostgresJobStore
    return make(target, table=table, worker=worker, registry=registry)


def open_async_store(dialect: str, target: str, table: str, worker: str,
                     registry: CollectorRegistry) -> AsyncJobStore:
    make = AsyncSqliteJobStore if dialect == "sqlite" else AsyncPostgresJobStore
    return make(target, table=table, worker=worker, registry=registry)


async def claim(store: JobStore | AsyncJobStore, job_id: str) -> ClaimOutcome:
    """One claim, off the loop either way: awaited (async store) or in a thread."""
    if isinstance(store, AsyncJobStore):
        return await store.claim(job_id)
    return await asyncio.to_thread(store.claim, job_id)


LANES = 4


async def lane(store: JobStore | AsyncJobStore, jobs: range, won: list[str]) -> None:
    for i in jobs:
        outcome = await claim(store, f"job-{i:05d}")
        if outcome.won:
            won.append(outcome.job_id)


async def race(store: JobStore | AsyncJobStore, n: int, batch: int) -> list[str]:
    """Per batch, four lanes walk the jobs in the same strided order as the rival's."""
    won: list[str] = []
    for start in range(0, n, batch):
        line = await asyncio.to_thread(sys.stdin.readline)
        if line.strip() != "go":
            break
        end = min(n, start + batch)
        await asyncio.gather(*(lane(store, range(start + k, end, LANES), won)
                               for k in range(LANES)))
        print("done", flush=True)
    return won


def main() -> None:
    dialect, target, table, worker, n, batch = sys.argv[1:7]
    registry = CollectorRegistry()
    store: JobStore | AsyncJobStore
    if sys.argv[7:] == ["async"]:
        store = open_async_store(dialect, target, table, worker, registry)
    else:
        store = open_store(dialect, target, table, worker, registry)
    print(json.dumps({"owner": store.owner}), flush=True)

    async def run() -> list[str]:
        try:
            return await race(store, int(n), int(batch))
        finally:
            if isinstance(store, AsyncJobStore):
                await store.aclose()

    won = asyncio.run(run())

    def count(outcome: str) -> float:
        return registry.get_sample_value(
            "corevo_claim_total", {"worker": worker, "outcome": outcome}) or 0.0

    waits = registry.get_sample_value("corevo_claim_queue_wait_seconds_count",
                                      {"worker": worker}) or 0.0
    print(json.dumps({"won": won, "metric_won": count("won"), "metric_lost": count("lost"),
                      "queue_waits": waits}), flush=True)
    if isinstance(store, JobStore):
        store.close()


if __name__ == "__main__":
    main()
