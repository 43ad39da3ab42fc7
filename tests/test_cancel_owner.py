"""The owner's inbox in one process: how runs end without a cancel, and a channel that heals.

Real SQLite files, real datagram sockets, a real redis-server; the "other side" is the
same store used the way another process would use it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from prometheus_client import CollectorRegistry

from corevo_obs.cancel import (
    CancelBus,
    CommandGateway,
    CommandInbox,
    Execution,
    SqliteCancelBus,
    execution_holder,
)
from corevo_obs.cancel.redis_bus import CHANNEL_PREFIX, RedisCancelBus, subscriber_count
from corevo_obs.claims import JobStore, SqliteJobStore
from corevo_obs.leases import AsyncLease, AsyncSqliteLeaseStore

Work = Callable[[Execution], Coroutine[Any, Any, Any]]


def count(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, {"worker": "w0", **labels}) or 0.0


async def start_run(jobs: JobStore, leases: AsyncSqliteLeaseStore, inbox: CommandInbox,
                    work: Work, heartbeat: float = 0.1) -> tuple[str, AsyncLease,
                                                                 asyncio.Task[Any]]:
    job = jobs.create_job()
    won = jobs.claim(job)
    assert won.claim is not None
    started = jobs.start(won.claim)
    assert started.execution_id is not None
    lease = await leases.acquire(holder=execution_holder(inbox.owner, started.execution_id))
    assert lease is not None
    task = asyncio.get_running_loop().create_task(
        inbox.run(won.claim, started.execution_id, lease, work, heartbeat=heartbeat))
    await asyncio.sleep(0)  # let the run register before commands arrive
    return job, lease, task


async def forever(run: Execution) -> None:
    await asyncio.Event().wait()


def with_stores(tmp_path: Path, registry: CollectorRegistry,
                scenario: Callable[..., Coroutine[Any, Any, None]],
                bus: Callable[[str], CancelBus] = SqliteCancelBus, limit: int = 2) -> None:
    db = str(tmp_path / "c.db")

    async def main() -> None:
        jobs = SqliteJobStore(db, worker="w0", registry=registry)
        leases = AsyncSqliteLeaseStore("q", db, limit=limit, timeout=5.0, worker="w0",
                                       registry=registry, busy_timeout=1.0)
        b = bus(db)
        inbox = CommandInbox(b, jobs, reconnect=0.2)
        await inbox.start()
        try:
            await scenario(jobs, leases, b, inbox)
        finally:
            await inbox.aclose()
            await b.aclose()
            await leases.aclose()
            jobs.close()

    asyncio.run(main())


def test_lost_lease_stops_the_run_and_later_commands_are_fenced(
        tmp_path: Path, registry: CollectorRegistry) -> None:
    async def scenario(jobs: JobStore, leases: AsyncSqliteLeaseStore, bus: CancelBus,
                       inbox: CommandInbox) -> None:
        job, lease, task = await start_run(jobs, leases, inbox, forever)
        target = await CommandGateway(bus, jobs).lookup(job)
        assert await leases.release(lease.holder)  # the platform reaped it as dead
        stop = await asyncio.wait_for(task, 2)
        assert stop.state == "lost" and stop.path is None
        job_row = jobs.get(job)
        assert job_row is not None and job_row.state == "lost"
        routed = await CommandGateway(bus, jobs).route(target, "input", "too late")
        assert routed.reached == 1
        await asyncio.sleep(0.1)

    with_stores(tmp_path, registry, scenario)
    assert count(registry, "corevo_command_routed_total", outcome="fenced") == 1
    assert count(registry, "corevo_lease_heartbeat_total", quota="q", outcome="lost") == 1


def test_completed_and_failed_runs_write_their_state_and_free_the_slot(
        tmp_path: Path, registry: CollectorRegistry) -> None:
    async def done(run: Execution) -> str:
        return "answer"

    async def broken(run: Execution) -> None:
        raise RuntimeError("tool failed")

    async def scenario(jobs: JobStore, leases: AsyncSqliteLeaseStore, bus: CancelBus,
                       inbox: CommandInbox) -> None:
        ok_job, _, ok = await start_run(jobs, leases, inbox, done)
        bad_job, _, bad = await start_run(jobs, leases, inbox, broken)
        assert (await ok).state == "completed" and (await ok).result == "answer"
        failed = await bad
        assert failed.state == "failed" and isinstance(failed.error, RuntimeError)
        states = [getattr(jobs.get(j), "state", None) for j in (ok_job, bad_job)]
        assert states == ["completed", "failed"]
        assert await leases.holders() == []
        assert inbox.running() == []
        assert (await CommandGateway(bus, jobs).cancel(ok_job)).outcome == "no_owner"

    with_stores(tmp_path, registry, scenario)
    assert count(registry, "corevo_cancel_delivered_total", path="pubsub") == 0


def test_inputs_reach_the_execution_in_order(tmp_path: Path,
                                             registry: CollectorRegistry) -> None:
    got: list[str | None] = []

    async def reader(run: Execution) -> None:
        while len(got) < 3:
            got.append(await run.inputs.get())

    async def scenario(jobs: JobStore, leases: AsyncSqliteLeaseStore, bus: CancelBus,
                       inbox: CommandInbox) -> None:
        job, _, task = await start_run(jobs, leases, inbox, reader)
        gw = CommandGateway(bus, jobs)
        for text in ("a", "b", "c"):
            assert (await gw.send_input(job, text)).reached == 1
        assert (await asyncio.wait_for(task, 2)).state == "completed"

    with_stores(tmp_path, registry, scenario)
    assert got == ["a", "b", "c"]
    assert count(registry, "corevo_command_routed_total", outcome="applied") == 3


def test_a_cut_redis_subscriber_comes_back_and_pubsub_works_again(
        tmp_path: Path, registry: CollectorRegistry, redis_url: str) -> None:
    async def scenario(jobs: JobStore, leases: AsyncSqliteLeaseStore, bus: CancelBus,
                       inbox: CommandInbox) -> None:
        job, _, task = await start_run(jobs, leases, inbox, forever, heartbeat=3.0)
        admin = aioredis.Redis.from_url(redis_url)
        channel = CHANNEL_PREFIX + inbox.owner
        assert await admin.client_kill_filter(_type="pubsub") == 1
        for _ in range(200):  # resubscribed after the 0.2 s reconnect pause
            await asyncio.sleep(0.02)
            if await subscriber_count(admin, channel):
                break
        await admin.aclose()
        routed = await CommandGateway(bus, jobs).cancel(job)
        assert routed.reached == 1
        stop = await asyncio.wait_for(task, 2)
        assert stop.path == "pubsub" and stop.latency is not None and stop.latency < 0.5

    with_stores(tmp_path, registry, scenario, bus=lambda db: RedisCancelBus(redis_url))
    assert count(registry, "corevo_cancel_delivered_total", path="pubsub") == 1
    assert count(registry, "corevo_instrumentation_errors_total", component="cancel-channel") == 1


def test_a_run_that_finished_as_the_cancel_arrived_counts_as_completed(
        tmp_path: Path, registry: CollectorRegistry) -> None:
    async def finishes_in_the_same_step(run: Execution) -> str:
        run.request_stop("cancelled", "pubsub", 0.0)  # as if the message landed just now
        return "done"

    async def scenario(jobs: JobStore, leases: AsyncSqliteLeaseStore, bus: CancelBus,
                       inbox: CommandInbox) -> None:
        job, _, task = await start_run(jobs, leases, inbox, finishes_in_the_same_step)
        stop = await asyncio.wait_for(task, 2)
        assert stop.state == "completed" and stop.result == "done" and stop.path is None
        assert getattr(jobs.get(job), "state", None) == "completed"

    with_stores(tmp_path, registry, scenario)
    assert count(registry, "corevo_cancel_delivered_total", path="pubsub") == 0


def test_many_runs_on_one_owner_each_stop_on_their_own_cancel(
        tmp_path: Path, registry: CollectorRegistry, redis_url: str) -> None:
    """30 executions on one inbox, 20 cancelled at once over Redis: exactly those stop."""
    n, cancelled = 30, 20

    async def scenario(jobs: JobStore, leases: AsyncSqliteLeaseStore, bus: CancelBus,
                       inbox: CommandInbox) -> None:
        runs = [await start_run(jobs, leases, inbox, forever, heartbeat=3.0)
                for _ in range(n)]
        gw = CommandGateway(bus, jobs)
        routed = await asyncio.gather(*(gw.cancel(job) for job, _, _ in runs[:cancelled]))
        assert all(r.reached == 1 for r in routed)
        stops = await asyncio.wait_for(
            asyncio.gather(*(task for _, _, task in runs[:cancelled])), 5)
        assert {(s.state, s.path) for s in stops} == {("cancelled", "pubsub")}
        assert len(inbox.running()) == n - cancelled
        assert not any(task.done() for _, _, task in runs[cancelled:])
        for _, _, task in runs[cancelled:]:
            task.cancel()

    def bus(db: str) -> CancelBus:
        return RedisCancelBus(redis_url)

    with_stores(tmp_path, registry, scenario, bus=bus, limit=n)
    assert count(registry, "corevo_cancel_delivered_total", path="pubsub") == cancelled
    assert count(registry, "corevo_command_routed_total", outcome="applied") == cancelled


def test_a_heartbeat_the_lease_timeout_cannot_cover_is_refused(
        tmp_path: Path, registry: CollectorRegistry) -> None:
    """``heartbeat=5`` on a 5 s lease (1 s store wait, 0.5 s margin) would let a second
    holder take the slot while the work went on: refused before the work starts, by the
    same check the store applies to its own interval and ``keep_alive(interval)``."""
    import pytest

    from corevo_obs.core.errors import ConfigError, CorevoObsError

    started: list[Execution] = []

    async def work(run: Execution) -> None:
        started.append(run)

    async def scenario(jobs: JobStore, leases: AsyncSqliteLeaseStore, bus: CancelBus,
                       inbox: CommandInbox) -> None:
        with pytest.raises(ConfigError) as caught:
            await (await start_run(jobs, leases, inbox, work, heartbeat=5.0))[2]
        assert isinstance(caught.value, CorevoObsError)
        assert str(caught.value) == (
            "CommandInbox.run heartbeat: timeout 5s is too short: heartbeat interval 5s + "
            "SQLite busy timeout 1s + stop margin 0.5s = 6.5s; lower the interval below "
            "3.5s or raise the timeout above 6.5s")
        assert started == [] and inbox.running() == []
        lease = await leases.acquire()
        assert lease is not None
        with pytest.raises(ConfigError, match="keep_alive: .* below 3.5s"):
            lease.keep_alive(interval=4.0)
        lease.keep_alive(interval=3.0).cancel()  # within bounds: accepted
        await lease.release()
        _job, lease2, task = await start_run(jobs, leases, inbox, work, heartbeat=3.0)
        assert (await task).state == "completed" and started

    with_stores(tmp_path, registry, scenario)
