"""Cancel and command routing across real processes, on Redis and on SQLite alone.

Each test spawns an owner process (tests/helpers/cancel_worker.py) that claims a job,
runs it under a lease with a heartbeat of HEARTBEAT s and listens on its wake-up channel;
the test is the gateway. The owner's metrics are read back from its multiprocess files.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, multiprocess

from corevo_obs.cancel import CancelBus, CommandGateway, SideEffectGate, SqliteCancelBus
from corevo_obs.claims import JobStore, PostgresJobStore, SqliteJobStore
from corevo_obs.leases import AsyncLeaseStore
from corevo_obs.observer import MetricsObserver
from tests.conftest import helper_cmd
from tests.helpers.lease_kit import store_for

HEARTBEAT, LEASE_TIMEOUT, QUOTA = 0.5, 1.5, "agents"


@dataclass
class Rig:
    backend: str
    tmp: Path
    env: dict[str, str]
    registry: CollectorRegistry
    redis_url: str | None = None
    pg_dsn: str | None = None
    jobs: JobStore = field(init=False)

    def __post_init__(self) -> None:
        self.db = str(self.tmp / "corevo.db")
        self.table = f"jobs_{uuid.uuid4().hex[:10]}"
        opts: dict[str, Any] = {"table": self.table, "worker": "gateway",
                                "registry": self.registry}
        self.jobs = (PostgresJobStore(self.pg_dsn, **opts) if self.pg_dsn
                     else SqliteJobStore(self.db, **opts))

    def bus(self) -> CancelBus:
        if self.redis_url:
            from corevo_obs.cancel.redis_bus import RedisCancelBus

            return RedisCancelBus(self.redis_url)
        return SqliteCancelBus(self.db)

    def leases(self) -> AsyncLeaseStore:
        opts: dict[str, Any] = {"limit": 1, "timeout": LEASE_TIMEOUT, "worker": "gateway",
                                "registry": self.registry}
        store: AsyncLeaseStore = store_for(self.redis_url or self.db, QUOTA,
                                           asynchronous=True, **opts)
        return store

    def gateway(self, bus: CancelBus, marker_ttl: float = 60.0) -> CommandGateway:
        obs = MetricsObserver(worker="gateway", registry=self.registry)
        return CommandGateway(bus, self.jobs, observer=obs, marker_ttl=marker_ttl)

    def owner_metric(self, name: str, **labels: str) -> float:
        """A metric summed over the owner processes' multiprocess files."""
        reg = CollectorRegistry()
        multiprocess.MultiProcessCollector(reg, path=self.env["PROMETHEUS_MULTIPROC_DIR"])
        return reg.get_sample_value(name, {"worker": "owner", **labels}) or 0.0

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, {"worker": "gateway", **labels}) or 0.0


@pytest.fixture(params=["sqlite", "redis", "redis-postgres"])
def rig(request: pytest.FixtureRequest, tmp_path: Path, worker_env: dict[str, str],
        registry: CollectorRegistry) -> Iterator[Rig]:
    """SQLite alone (the embedded default); Redis bus and leases with jobs in SQLite; and
    the production layout, Redis with jobs in PostgreSQL.
    """
    url = request.getfixturevalue("redis_url") if request.param != "sqlite" else None
    dsn = request.getfixturevalue("pg_dsn") if request.param == "redis-postgres" else None
    rig = Rig(request.param.split("-")[0], tmp_path, worker_env, registry, url, dsn)
    if url:  # a flushed server: the quota is new, no restart fence
        store_for(url, QUOTA, fresh=True, limit=1, timeout=LEASE_TIMEOUT).close()
    yield rig
    if dsn:
        rig.jobs.db.run(f"DROP TABLE IF EXISTS {rig.table}", {})
    rig.jobs.close()


class Owner:
    """A running cancel_worker.py and its JSON event stream."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def expect(self, event: str, within: float = 10.0) -> dict[str, Any]:
        assert self.proc.stdout is not None
        async with asyncio.timeout(within):
            while True:
                line = await self.proc.stdout.readline()
                assert line, f"owner exited before {event!r}"
                msg: dict[str, Any] = json.loads(line)
                if msg["event"] == event:
                    return msg

    async def say(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()


@asynccontextmanager
async def owner(rig: Rig, job: str, **extra: Any) -> AsyncIterator[Owner]:
    cfg = {"backend": rig.backend, "redis_url": rig.redis_url, "db": rig.db, "job": job,
           "pg_dsn": rig.pg_dsn, "table": rig.table,
           "worker": "owner", "quota": QUOTA, "heartbeat": HEARTBEAT,
           "lease_timeout": LEASE_TIMEOUT, **extra}
    cmd = helper_cmd("cancel_worker.py", json.dumps(cfg))
    proc = await asyncio.create_subprocess_exec(
        *cmd, env=rig.env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
    try:
        yield Owner(proc)
        async with asyncio.timeout(10):
            await proc.wait()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


@dataclass
class Scene:
    """What a scenario works with: the gateway's bus, lease store and gateway, one job."""

    rig: Rig
    bus: CancelBus
    leases: AsyncLeaseStore
    gw: CommandGateway
    job: str


def run(rig: Rig, scenario: Callable[[Scene], Coroutine[Any, Any, None]], *,
        marker_ttl: float = 60.0) -> None:
    async def main() -> None:
        bus, leases = rig.bus(), rig.leases()
        try:
            await scenario(Scene(rig, bus, leases, rig.gateway(bus, marker_ttl),
                                 rig.jobs.create_job()))
        finally:
            await bus.aclose()
            await leases.aclose()

    asyncio.run(main())


# --- the four paths ---------------------------------------------------------------------

def test_pubsub_cancel_stops_within_a_fraction_of_the_heartbeat(rig: Rig) -> None:
    async def scenario(sc: Scene) -> None:
        rig, bus, leases, gw, job = sc.rig, sc.bus, sc.leases, sc.gw, sc.job
        async with owner(rig, job) as w:
            running = await w.expect("running")
            routed = await gw.cancel(job)
            assert routed.outcome == "routed" and routed.reached == 1
            stopped = await w.expect("stopped")
            seen = await gw.wait_stopped(routed, leases, within=5)
            late = await w.expect("late")
        assert stopped["state"] == "cancelled" and stopped["path"] == "pubsub"
        assert stopped["latency"] < HEARTBEAT / 4, stopped
        assert seen.state == "cancelled" and seen.path is None
        # the executor acknowledged the cancel: a write with its key is late, another is not
        assert late["allowed"] is False
        # ... and so is one that reaches another process (the gateway's) with that key:
        # the acknowledgement is shared state, not the owner's memory
        gate = SideEffectGate(bus, MetricsObserver(worker="gateway", registry=rig.registry))
        assert await gate.allowed(f"{running['execution']}:2") is False
        assert await gate.allowed("some-other-execution:1") is True
        assert await bus.marker(running["execution"]) is not None
        latency.append(stopped["latency"])

    latency: list[float] = []
    run(rig, scenario)
    assert rig.metric("corevo_cancel_requested_total") == 1
    assert rig.owner_metric("corevo_cancel_delivered_total", path="pubsub") == 1
    assert rig.owner_metric("corevo_cancel_delivered_total", path="marker") == 0
    assert rig.owner_metric("corevo_cancel_latency_seconds_count", path="pubsub") == 1
    assert rig.owner_metric("corevo_cancel_latency_seconds_count", path="marker") == 0
    # the histogram holds the latency the owner measured, not just an event
    assert rig.owner_metric("corevo_cancel_latency_seconds_sum",
                            path="pubsub") == pytest.approx(latency[0])
    assert rig.owner_metric("corevo_command_routed_total", outcome="applied") == 1
    assert rig.owner_metric("corevo_late_side_effects_total") == 1
    assert rig.metric("corevo_late_side_effects_total") == 1


async def _cut_channel(rig: Rig, w: Owner, owner_id: str) -> None:
    """Make the owner's wake-up channel miss the next message."""
    if rig.redis_url is None:
        await w.say("drop 10")  # the owner unbinds its socket and rebinds 10 s later
        await w.expect("dropped")
        return
    import redis.asyncio as aioredis

    from corevo_obs.cancel.redis_bus import CHANNEL_PREFIX, subscriber_count

    admin = aioredis.Redis.from_url(rig.redis_url)
    await admin.client_kill_filter(_type="pubsub")  # the server cuts the subscriber
    channel = CHANNEL_PREFIX + owner_id
    for _ in range(500):  # until the server no longer counts the subscriber
        if not await subscriber_count(admin, channel):
            break
        await asyncio.sleep(0.01)
    else:
        raise AssertionError("the subscriber was not cut")
    await admin.aclose()


def test_lost_wakeup_still_stops_within_one_heartbeat_via_the_marker(rig: Rig) -> None:
    async def scenario(sc: Scene) -> None:
        rig, leases, gw, job = sc.rig, sc.leases, sc.gw, sc.job
        async with owner(rig, job, reconnect=10.0) as w:
            running = await w.expect("running")
            await _cut_channel(rig, w, running["owner"])
            routed = await gw.cancel(job)
            assert routed.reached == 0  # the wake-up reached nobody
            stopped = await w.expect("stopped")
            seen = await gw.wait_stopped(routed, leases, within=5)
        assert stopped["state"] == "cancelled" and stopped["path"] == "marker"
        assert stopped["latency"] <= HEARTBEAT + 0.15, stopped
        assert seen.state == "cancelled"
        latency.append(stopped["latency"])

    latency: list[float] = []
    run(rig, scenario)
    assert rig.metric("corevo_cancel_requested_total") == 1
    assert rig.owner_metric("corevo_cancel_delivered_total", path="marker") == 1
    assert rig.owner_metric("corevo_cancel_delivered_total", path="pubsub") == 0
    assert rig.owner_metric("corevo_cancel_latency_seconds_count", path="marker") == 1
    assert rig.owner_metric("corevo_cancel_latency_seconds_count", path="pubsub") == 0
    assert rig.owner_metric("corevo_cancel_latency_seconds_sum",
                            path="marker") == pytest.approx(latency[0])
    assert rig.owner_metric("corevo_command_routed_total", outcome="applied") == 0
    assert rig.owner_metric("corevo_instrumentation_errors_total",
                            component="cancel-channel") == (1 if rig.redis_url else 0)


def test_sigkilled_owner_frees_its_slot_at_lease_expiry_and_the_marker_expires(
        rig: Rig) -> None:
    ttl = 2.0

    async def scenario(sc: Scene) -> None:
        rig, bus, leases, gw, job = sc.rig, sc.bus, sc.leases, sc.gw, sc.job
        async with owner(rig, job) as w:
            running = await w.expect("running")
            w.proc.send_signal(signal.SIGKILL)
            await w.proc.wait()
            killed_at = time.time()
            assert await leases.acquire() is None  # the dead owner still holds the slot
            routed = await gw.cancel(job)
            assert routed.reached == 0
            seen = await gw.wait_stopped(routed, leases, within=LEASE_TIMEOUT + 3)
            expired_after = time.time() - killed_at
            assert seen.path == "lease_expiry", seen
            assert LEASE_TIMEOUT - HEARTBEAT <= expired_after <= LEASE_TIMEOUT + 0.5
            slot = await leases.acquire()  # the ghost is reaped, the slot is back
            assert slot is not None
            await slot.release()
            assert await bus.marker(running["execution"]) is not None
            assert routed.command is not None
            await asyncio.sleep(max(0.0, routed.command.sent_at + ttl + 0.1 - time.time()))
            assert await bus.marker(running["execution"]) is None
            if isinstance(bus, SqliteCancelBus):  # the dead row goes with the next write
                await bus.mark("another-execution", time.time(), ttl)
                assert bus.rows() == 1
            else:
                from corevo_obs.cancel.redis_bus import marker_key

                raw = bus.client  # type: ignore[attr-defined]
                assert await raw.exists(marker_key(running["execution"])) == 0

    run(rig, scenario, marker_ttl=ttl)
    assert rig.metric("corevo_cancel_delivered_total", path="lease_expiry") == 1
    assert rig.metric("corevo_cancel_latency_seconds_count", path="lease_expiry") == 1
    # the owner died before it could deliver anything by either of its own paths
    for path in ("pubsub", "marker"):
        assert rig.owner_metric("corevo_cancel_delivered_total", path=path) == 0
    assert rig.metric("corevo_lease_reaped_total", quota=QUOTA) == 1


def test_a_cancel_that_waited_out_a_frozen_owner_is_fenced_by_its_reaped_lease(
        rig: Rig) -> None:
    """The article's unsolved part, made visible: the owner froze (SIGSTOP) past its lease
    timeout, the gateway saw the lease expire and the slot was taken by someone else; the
    cancel still sat in the owner's socket. On resume the owner must not act as the owner.
    """
    async def scenario(sc: Scene) -> None:
        rig, leases, gw, job = sc.rig, sc.leases, sc.gw, sc.job
        async with owner(rig, job, linger=True) as w:
            await w.expect("running")
            w.proc.send_signal(signal.SIGSTOP)
            routed = await gw.cancel(job)
            assert routed.reached == 1  # buffered for the frozen process
            seen = await gw.wait_stopped(routed, leases, within=LEASE_TIMEOUT + 3)
            assert seen.path == "lease_expiry"
            slot = await leases.acquire()  # reaps the frozen owner's lease
            assert slot is not None
            w.proc.send_signal(signal.SIGCONT)
            stopped = await w.expect("stopped")
            await asyncio.sleep(0.3)  # the buffered command is read and re-checked
            await w.say("exit")
            await slot.release()
        assert stopped["state"] == "lost" and stopped["path"] is None
        job_row = await asyncio.to_thread(rig.jobs.get, job)
        assert job_row is not None and job_row.state == "lost"

    run(rig, scenario)
    assert rig.owner_metric("corevo_command_routed_total", outcome="fenced") == 1
    assert rig.owner_metric("corevo_command_routed_total", outcome="applied") == 0
    assert rig.owner_metric("corevo_cancel_delivered_total", path="pubsub") == 0
    assert rig.owner_metric("corevo_cancel_delivered_total", path="marker") == 0
    assert rig.metric("corevo_cancel_delivered_total", path="lease_expiry") == 1


def test_command_for_an_old_epoch_is_fenced_and_never_applied(rig: Rig) -> None:
    async def scenario(sc: Scene) -> None:
        rig, gw, job = sc.rig, sc.gw, sc.job
        async with owner(rig, job, stall=True) as w:
            claimed = await w.expect("claimed")
            stale = await gw.lookup(job)  # the gateway reads owner + epoch N ...
            assert stale is not None and stale.epoch == claimed["epoch"] == 1
            # ... the owner stalls before its start, is reclaimed, and comes back at N+1
            assert rig.jobs.reclaim_prestart(owner=claimed["owner"]) == 1
            await w.say("go")
            assert (await w.expect("start"))["outcome"] == "fenced"
            running = await w.expect("running")
            assert running["epoch"] == 2 and running["owner"] == stale.owner
            old = await gw.route(stale, "input", "for epoch 1")  # arrives after the move
            assert old.reached == 1
            fresh = await gw.send_input(job, "for epoch 2")
            got = await w.expect("input")
            assert got == {"event": "input", "payload": "for epoch 2", "epoch": 2}
            assert fresh.command is not None and fresh.command.epoch == 2
            await gw.cancel(job)
            stopped = await w.expect("stopped")
        assert stopped["path"] == "pubsub"

    run(rig, scenario)
    assert rig.owner_metric("corevo_command_routed_total", outcome="fenced") == 1
    assert rig.owner_metric("corevo_command_routed_total", outcome="applied") == 2


def test_no_owner_for_a_finished_or_unknown_job(tmp_path: Path,
                                                registry: CollectorRegistry) -> None:
    async def scenario() -> None:
        db = str(tmp_path / "c.db")
        jobs = SqliteJobStore(db, worker="gateway", registry=registry)
        bus = SqliteCancelBus(db)
        gw = CommandGateway(bus, jobs)
        queued = jobs.create_job()
        assert (await gw.cancel(queued)).outcome == "cancelled_queued"
        assert (await gw.cancel(queued)).outcome == "no_owner"  # now terminal
        assert (await gw.send_input("no-such-job", "x")).outcome == "no_owner"
        await bus.aclose()

    asyncio.run(scenario())
    assert registry.get_sample_value("corevo_command_routed_total",
                                     {"worker": "gateway", "outcome": "no_owner"}) == 2
