"""A worker that claims jobs, optionally pauses before starting them, then starts them.

Usage: claim_worker.py sqlite|postgres TARGET TABLE WORKER N --pause S [--hang] [--async]
Claims job-00000 .. job-N-1, prints ``{"owner", "claims"}``, sleeps S seconds (the window
in which a test freezes it with SIGSTOP), runs the started CAS on each claim and prints
``{"outcomes", "metric_started", "metric_fenced"}``. With ``--hang`` it then sleeps
forever, holding running jobs, until it is killed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from claim_racer import claim, open_async_store, open_store
from prometheus_client import CollectorRegistry

from corevo_obs.claims import AsyncJobStore, Claim, JobStore, StartOutcome


async def start(store: JobStore | AsyncJobStore, c: Claim) -> StartOutcome:
    if isinstance(store, AsyncJobStore):
        return await store.start(c)
    return await asyncio.to_thread(store.start, c)


async def main(ns: argparse.Namespace) -> None:
    registry = CollectorRegistry()
    opener = open_async_store if ns.use_async else open_store
    store = opener(ns.dialect, ns.target, ns.table, ns.worker, registry)
    claims = []
    for i in range(ns.n):
        won = await claim(store, f"job-{i:05d}")
        assert won.claim is not None, f"job-{i:05d} was not claimable"
        claims.append(won.claim)
    print(json.dumps({"owner": store.owner, "claims": [vars(c) for c in claims]}), flush=True)
    await asyncio.sleep(ns.pause)  # before execution_started: the recovery boundary
    outcomes = [(await start(store, c)).outcome for c in claims]

    def count(outcome: str) -> float:
        return registry.get_sample_value(
            "corevo_claim_start_total", {"worker": ns.worker, "outcome": outcome}) or 0.0

    print(json.dumps({"outcomes": outcomes, "metric_started": count("started"),
                      "metric_fenced": count("fenced"), "at": time.time()}), flush=True)
    if ns.hang:
        await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("dialect")
    p.add_argument("target")
    p.add_argument("table")
    p.add_argument("worker")
    p.add_argument("n", type=int)
    p.add_argument("--pause", type=float, default=0.0)
    p.add_argument("--hang", action="store_true")
    p.add_argument("--async", dest="use_async", action="store_true")
    asyncio.run(main(p.parse_args()))
