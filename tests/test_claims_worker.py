"""The documented claims worker loop (examples/claims_worker.py) on a real job table:
two workers run every job exactly once; an owner that is alive but paused is left alone
by ``recover()`` and handled by the time bounds (its unstarted claim requeued and its
later start fenced; its overdue run marked ``timeout`` and its finish refused)."""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from corevo_obs.claims import AsyncJobStore, AsyncSqliteJobStore, Job
from examples.claims_worker import Cadence, finish_with_retry, recover, work_once, worker_loop

FAST = Cadence(poll=0.02, recover_every=0.1, claim_ttl=0.3, run_limit=0.5)
Opener = Callable[[str], AsyncJobStore]


@pytest.fixture(params=["sqlite", "postgres"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    registry = CollectorRegistry()
    if request.param == "sqlite":
        path = tmp_path / "jobs.db"
        return lambda worker: AsyncSqliteJobStore(path, worker=worker, registry=registry)
    dsn = os.environ.get("COREVO_TEST_PG_DSN")
    if not dsn:
        pytest.skip("COREVO_TEST_PG_DSN not set (source .ci/services.sh)")
    from corevo_obs.claims import AsyncPostgresJobStore

    table = f"jobs_{os.getpid()}_{time.monotonic_ns()}"
    return lambda worker: AsyncPostgresJobStore(dsn, table=table, worker=worker,
                                                registry=registry)


def test_two_workers_run_every_job_exactly_once(open_store: Opener) -> None:
    ran: Counter[str] = Counter()
    all_ran = asyncio.Event()

    async def run(job: Job) -> None:
        ran[job.id] += 1
        await asyncio.sleep(0.002)
        if sum(ran.values()) >= 30:
            all_ran.set()

    async def main() -> list[str]:
        async with open_store("a") as a, open_store("b") as b:
            ids = [await a.create_job(payload=str(i)) for i in range(30)]
            stop = asyncio.Event()
            loops = [asyncio.create_task(worker_loop(s, run, stop, FAST)) for s in (a, b)]
            async with asyncio.timeout(60):
                await all_ran.wait()
            stop.set()
            counts = await asyncio.gather(*loops)
            assert sum(counts) == len(ids)
            return [j.state for j in [await a.get(i) for i in ids] if j is not None]

    states = asyncio.run(main())
    assert states == ["completed"] * 30
    assert len(ran) == 30 and set(ran.values()) == {1}


def test_a_paused_owner_is_recovered_by_the_time_bounds(open_store: Opener) -> None:
    async def main() -> None:
        async with open_store("paused") as paused, open_store("live") as live:
            unstarted = await paused.create_job()
            running = await paused.create_job()
            held = (await paused.claim(unstarted)).claim
            busy = (await paused.claim(running)).claim
            assert held is not None and busy is not None
            assert (await paused.start(busy, "exec-1")).started
            # the owner's process is alive: recover() alone cannot judge it
            assert (await live.recover()).reclaimed == 0
            await asyncio.sleep(FAST.run_limit + 0.1)   # past both bounds
            assert await recover(live, FAST) == 2
            ran: list[str] = []

            async def run(job: Job) -> None:
                ran.append(job.id)

            assert await work_once(live, run, FAST) == 1 and ran == [unstarted]
            # the paused owner resumes: its start is fenced, its finish refused
            assert not (await paused.start(held, "exec-2")).started
            assert not await finish_with_retry(paused, busy, "exec-1", "completed", FAST)
            job = await live.get(running)
            assert job is not None and job.state == "timeout"

    asyncio.run(main())
