"""One claim racer: its own process, event loop and DB connection.

Usage: claim_racer.py sqlite|postgres TARGET TABLE WORKER N
Prints ``ready`` with its owner id, waits for ``go`` on stdin, then tries to claim jobs
job-00000 .. job-N-1 in four strided lanes (each claim in a thread, off the
loop) and prints one
JSON line: the jobs it won and its own claim counters.
"""

from __future__ import annotations

import asyncio
import json
import sys

from prometheus_client import CollectorRegistry

from corevo_obs.claims import JobStore, PostgresJobStore, SqliteJobStore


def open_store(dialect: str, target: str, table: str, worker: str,
               registry: CollectorRegistry) -> JobStore:
    make = SqliteJobStore if dialect == "sqlite" else PostgresJobStore
    return make(target, table=table, worker=worker, registry=registry)


LANES = 4


async def lane(store: JobStore, n: int, first: int, won: list[str]) -> None:
    for i in range(first, n, LANES):
        outcome = await asyncio.to_thread(store.claim, f"job-{i:05d}")
        if outcome.won:
            won.append(outcome.job_id)


async def race(store: JobStore, n: int) -> list[str]:
    """Four lanes per process walk the jobs in the same strided order as the rival's."""
    won: list[str] = []
    await asyncio.gather(*(lane(store, n, k, won) for k in range(LANES)))
    return won


def main() -> None:
    dialect, target, table, worker, n = sys.argv[1:6]
    registry = CollectorRegistry()
    store = open_store(dialect, target, table, worker, registry)
    print(json.dumps({"owner": store.owner}), flush=True)
    if sys.stdin.readline().strip() != "go":
        return
    won = asyncio.run(race(store, int(n)))

    def count(outcome: str) -> float:
        return registry.get_sample_value(
            "corevo_claim_total", {"worker": worker, "outcome": outcome}) or 0.0

    waits = registry.get_sample_value("corevo_claim_queue_wait_seconds_count",
                                      {"worker": worker}) or 0.0
    print(json.dumps({"won": won, "metric_won": count("won"), "metric_lost": count("lost"),
                      "queue_waits": waits}), flush=True)
    store.close()


if __name__ == "__main__":
    main()
