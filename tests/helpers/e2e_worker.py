"""A worker for the Prometheus end-to-end test: the suite's real instrumentation, real load.

Usage: e2e_worker.py WORKER --db PATH --jobs PATH [--stall-after S --stall-for S] --run-for S

Drives, each ~0.1 s: loop health (sampler, heartbeat, watchdog), a task through its four
stages, an offload adapter with one slot (so callers wait and get rejected), a persistent
lease on quota ``llm`` (limit 2 across all workers: one worker is rejected until a holder
goes quiet and is reaped) and short leases on ``db`` (a double release every 5th round),
jobs through a SQLite ``JobStore`` (queued and local paths, a losing second claim, and every
10th round a claim reclaimed before its start, whose start is then fenced), and each run's
events through a ``Projector`` (out of order, duplicated, a stale epoch, one missed event
recovered by replay from a SQLite ``EventHistory``). A scripted stall freezes the loop
(sync sleep); the stalled worker's ``llm`` lease goes unrenewed, gets reaped, and its next
heartbeat is ``lost``.

With ``--cancels`` the worker also runs a gateway and an owner on a ``SqliteCancelBus``
(the jobs file, datagram wake-ups), one round each ~0.5 s: an execution whose job was
reclaimed once gets an input addressed to the old epoch (``fenced``) and one to the
current (``applied``), then a cancel delivered by ``pubsub``; a second cancel finds no
owner; a write with its idempotency key is a late side effect; an input too big for one
datagram fails the wake-up (absorbed, counted as an instrumentation error). A second
execution is cancelled while the owner's channel is down (``marker``), and a third whose
owner is gone (a claim and lease never renewed, as after a SIGKILL) stops by
``lease_expiry``. Prints one JSON line when serving: {"port": ...}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from lease_kit import SQLITE_FAST

from corevo_obs import MetricsServer, enable_multiprocess, install_loop_health
from corevo_obs.cancel import (
    CommandGateway,
    CommandInbox,
    Execution,
    SideEffectGate,
    SqliteCancelBus,
    Stop,
    Target,
    execution_holder,
)
from corevo_obs.claims import Claim, SqliteJobStore
from corevo_obs.events import Event, EventHistory, Projector
from corevo_obs.leases import (
    AsyncSqliteLeaseStore,
    Lease,
    LeaseAuditor,
    LeaseBuffer,
    SqliteLeaseStore,
)
from corevo_obs.offload import OffloadAdapter, OffloadRejected
from corevo_obs.stages import StageRecorder

LEASE_TIMEOUT = 1.0
HEARTBEAT = 0.25  # an execution's lease heartbeat (and marker read)
TOO_BIG = "x" * 300_000  # more than one Unix datagram can carry


class Workload:
    def __init__(self, worker: str, db: str, jobs: str) -> None:
        self.worker = worker
        self.stages = StageRecorder(worker=worker)
        self.blob = OffloadAdapter(name="blob", max_in_flight=1, max_waiting=1,
                                   wait_timeout=0.05, worker=worker)
        self.llm = SqliteLeaseStore("llm", db, limit=2, timeout=LEASE_TIMEOUT, worker=worker,
                                    **SQLITE_FAST)
        self.dbq = SqliteLeaseStore("db", db, limit=5, timeout=LEASE_TIMEOUT, worker=worker,
                                    **SQLITE_FAST)
        self.audit = LeaseAuditor(self.llm)
        # a buffer of one pre-leased slot on its own quota: the round's lease is handed
        # back to it and taken again next round without a store call
        self.buffer = LeaseBuffer(SqliteLeaseStore("buf", db, limit=4, timeout=LEASE_TIMEOUT,
                                                   worker=worker, **SQLITE_FAST),
                                  size=1, idle=0.8)  # rounds come every 0.5 s
        self.jobs = SqliteJobStore(jobs, worker=worker)
        self.history = EventHistory(jobs + ".events")
        self.projector = Projector(lambda _event: None, worker=worker)
        self.session: Lease | None = None  # this worker's persistent llm lease, if granted
        self.round = 0

    async def task(self) -> None:
        t = self.stages.task("chat", accepted_at=time.time() - 0.01)
        t.started()
        async with t.external("model"):
            await asyncio.sleep(0.005)
        t.first_event()
        if self.round == 1:
            t.first_event()  # a duplicate mark, absorbed and counted as a mark error
        t.finish("completed")

    async def offload(self) -> None:
        async def one() -> None:
            try:
                await self.blob.run(time.sleep, 0.03)
            except OffloadRejected:
                pass
        await asyncio.gather(one(), one(), one())  # 1 runs, 1 waits, 1 is rejected

    def leases(self) -> None:
        if self.session is None:
            self.session = self.llm.acquire()
        elif not self.session.heartbeat():
            self.session = None  # lost: reaped while this worker was frozen
        buffered = self.buffer.acquire()
        if buffered is not None:
            self.buffer.release(buffered)  # kept for the next round (recent demand)
        short = self.dbq.acquire()
        if short is not None:
            short.release()
            if self.round % 5 == 0:
                short.release()  # double release: 'noop'
        self.audit.audit()

    def claims(self) -> None:
        job = self.jobs.create_job()
        won = self.jobs.claim(job).claim
        self.jobs.claim(job, owner="someone-else")  # the loser of the conditional update
        assert won is not None
        if self.round % 10 == 0:
            # the owner was judged gone before execution_started: requeued, then fenced
            self.jobs.reclaim_prestart(owner=won.owner)
            assert self.jobs.start(won).execution_id is None
            self.jobs.cancel_queued(job)
        else:
            self.run(won)
        self.run(self.jobs.create_local())
        if self.round % 5 == 0:
            self.jobs.recover()  # a recovery pass on a cadence: the oldest running job's age

    def run(self, claim: Claim) -> None:
        execution = self.jobs.start(claim).execution_id
        assert execution is not None
        self.events(claim, execution)
        self.jobs.finish(claim, execution, "completed")

    def events(self, claim: Claim, execution: str) -> None:
        e1, e2, e3 = (Event(claim.job_id, execution, claim.epoch, seq, "token")
                      for seq in (1, 2, 3))
        for e in (e1, e2, e3):
            self.history.append(e)
        for e in (e2, e1, e1):  # early (buffered), then applied with e2, then a duplicate
            self.projector.offer(e)
        self.projector.offer(Event(claim.job_id, "old", claim.epoch - 1, 4, "token"))
        self.projector.replay(self.history.latest(claim.job_id))  # e3 was never sent live
        self.projector.forget(claim.job_id)

    async def step(self) -> None:
        self.round += 1
        await self.task()
        await self.offload()
        self.leases()
        self.claims()


async def idle(run: Execution) -> None:
    """An execution that waits for inputs until it is cancelled."""
    while True:
        await run.inputs.get()


class Cancels:
    """A gateway and an owner in this worker, one cancel per delivery path each round."""

    def __init__(self, worker: str, db: str, jobs: str) -> None:
        self.jobs = SqliteJobStore(jobs, worker=worker)
        self.bus = SqliteCancelBus(jobs)
        self.execs = AsyncSqliteLeaseStore("exec", db, limit=20, timeout=LEASE_TIMEOUT,
                                           worker=worker, **SQLITE_FAST)
        self.inbox = CommandInbox(self.bus, self.jobs, reconnect=HEARTBEAT)
        self.gateway = CommandGateway(self.bus, self.jobs)
        self.gate = SideEffectGate(self.bus, self.jobs.observer)
        self.ghost = f"{self.jobs.owner}-ghost"

    async def execute(self, job: str, claim: Claim) -> tuple[str, asyncio.Task[Stop]]:
        execution = self.jobs.start(claim).execution_id
        assert execution is not None
        lease = await self.execs.acquire(holder=execution_holder(claim.owner, execution))
        assert lease is not None, "exec quota full"
        run = self.inbox.run(claim, execution, lease, idle, heartbeat=HEARTBEAT)
        task = asyncio.get_running_loop().create_task(run)
        await asyncio.sleep(0)  # let the run register with the inbox before commands arrive
        assert execution in {r.execution_id for r in self.inbox.running()}
        return execution, task

    def claim(self, job: str, owner: str | None = None) -> Claim:
        won = self.jobs.claim(job, owner=owner).claim
        assert won is not None
        return won

    async def pubsub(self) -> None:
        job = self.jobs.create_job()
        old = self.claim(job)
        self.jobs.reclaim_prestart(owner=old.owner)  # judged gone before it started
        execution, running = await self.execute(job, self.claim(job))
        stale = Target(job, old.owner, old.epoch, None)
        await self.gateway.route(stale, "input", "for the old epoch")  # fenced
        await self.gateway.send_input(job, "more")  # applied
        await self.gateway.send_input(job, TOO_BIG)  # the wake-up fails: absorbed
        await self.gateway.cancel(job)
        stop = await running
        assert (stop.state, stop.path) == ("cancelled", "pubsub"), stop
        await self.gateway.cancel(job)  # a second click: no owner any more
        assert not await self.gate.allowed(f"{execution}:1")  # a retry outlived the cancel

    async def marker(self) -> None:
        job = self.jobs.create_job()
        _, running = await self.execute(job, self.claim(job))
        await self.inbox.aclose()  # the channel is down: the wake-up is lost
        routed = await self.gateway.cancel(job)
        assert routed.reached == 0
        stop = await running
        assert (stop.state, stop.path) == ("cancelled", "marker"), stop
        await self.inbox.start()

    async def lease_expiry(self) -> None:
        job = self.jobs.create_job()
        claim = self.claim(job, owner=self.ghost)
        execution = self.jobs.start(claim).execution_id
        assert execution is not None
        lease = await self.execs.acquire(holder=execution_holder(self.ghost, execution))
        assert lease is not None, "exec quota full"  # never renewed: its owner is gone
        routed = await self.gateway.cancel(job)
        stopped = await self.gateway.wait_stopped(routed, self.execs, within=10 * LEASE_TIMEOUT)
        assert stopped.path == "lease_expiry", stopped
        self.jobs.mark_lost(owner=self.ghost)

    async def forever(self) -> None:
        await self.inbox.start()
        while True:
            await self.pubsub()
            await self.marker()
            await self.lease_expiry()
            await asyncio.sleep(0.5)


async def main(ns: argparse.Namespace) -> None:
    health = install_loop_health(worker=ns.worker, interval=0.05, stall_threshold=0.2)
    server = MetricsServer(port=0, scope="host").start()  # its own directory: host = itself
    work = Workload(ns.worker, ns.db, ns.jobs)
    cancels = Cancels(ns.worker, ns.db, ns.jobs) if ns.cancels else None
    cancelling = asyncio.get_running_loop().create_task(cancels.forever()) if cancels else None
    print(json.dumps({"port": server.port}), flush=True)
    t0 = time.monotonic()
    stalled = ns.stall_for <= 0
    while time.monotonic() - t0 < ns.run_for:
        await work.step()
        if not stalled and time.monotonic() - t0 >= ns.stall_after:
            stalled = True
            time.sleep(ns.stall_for)  # noqa: ASYNC251 - the injected freeze
        await asyncio.sleep(0.1)
        if cancelling is not None and cancelling.done():
            cancelling.result()  # a failed scenario ends the worker with its traceback
    if cancelling is not None:
        cancelling.cancel()
    await work.blob.aclose()
    await health.aclose()
    server.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("worker")
    p.add_argument("--db", required=True)
    p.add_argument("--jobs", required=True)
    p.add_argument("--stall-after", type=float, default=0.0)
    p.add_argument("--stall-for", type=float, default=0.0)
    p.add_argument("--run-for", type=float, default=60.0)
    p.add_argument("--cancels", action="store_true")
    ns = p.parse_args()
    enable_multiprocess()
    asyncio.run(main(ns))
