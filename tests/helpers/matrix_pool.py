"""One process of the alert matrix's job pool: a plain asyncio worker (no web framework)
that claims jobs from PostgreSQL and runs each under a Redis lease of a small quota.

Usage: matrix_pool.py (settings in the environment: ``COREVO_WORKER``, ``MATRIX_*``).

Its own metrics on ``MATRIX_METRICS_PORT`` (one process, one target: Prometheus' ``job``
label says "pool", apart from the web service). A runner loops: find a candidate, claim
it, wait for a lease (rejected acquires counted), start (the fence), work, release, then
finish — retried through a database outage, so no job stays ``running`` because the
server was down when it ended. A quota slot is for work, never for waiting on the
database: a start the database did not answer gives its lease back at once, and the
runner waits outside the quota, backing off (``POLL`` doubling up to ``BACKOFF_MAX``),
until the database says whether that start committed. Database calls give up after
``DB_TIMEOUT`` (a latency-bound worker's pool timeout), so an outage shows as a steady
stream of failed calls. The test drives faults over a line protocol on
``MATRIX_CONTROL_PORT``: ``heartbeat_lost SECONDS`` (hold a lease, then block the loop
past its timeout), ``fence`` (a claim whose start is fenced once a janitor requeued it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from prometheus_client import start_http_server

from corevo_obs import install_loop_health
from corevo_obs.claims import AsyncPostgresJobStore, Claim
from corevo_obs.core.errors import BackendUnavailable
from corevo_obs.leases import AsyncRedisLeaseStore, LeaseLost, LeaseRejected

POLL = 0.2
TABLE = "corevo_matrix_jobs"  # its own table: other tests' leftovers are not its jobs
LEASE_WAIT = 1.0
BACKOFF_MAX = 0.5
#: seconds a job-store call waits for a pooled connection before it fails (the web too)
DB_TIMEOUT = 0.5


async def backoff() -> AsyncIterator[None]:
    """Yield at once, then after pauses of ``POLL`` doubling up to ``BACKOFF_MAX``: the
    retry cadence of a call into a backend that did not answer."""
    pause = POLL
    while True:
        yield
        await asyncio.sleep(pause)
        pause = min(pause * 2, BACKOFF_MAX)


class Pool:
    def __init__(self) -> None:
        env = os.environ
        self.worker = env["COREVO_WORKER"]
        self.timeout = float(env["MATRIX_LEASE_TIMEOUT"])
        self.jobs = AsyncPostgresJobStore(env["MATRIX_PG_DSN"], table=TABLE, connect_timeout=2,
                                          statement_timeout=2, pool_timeout=DB_TIMEOUT)
        self.leases = AsyncRedisLeaseStore(env["MATRIX_QUOTA"], env["MATRIX_REDIS_URL"],
                                           limit=int(env["MATRIX_LIMIT"]),
                                           timeout=self.timeout, socket_timeout=0.5,
                                           connect_timeout=0.5)
        self.runners = int(env.get("MATRIX_RUNNERS", "2"))
        self.tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def start(self) -> None:
        while True:
            try:
                await self.jobs.setup()
                break
            except BackendUnavailable:
                await asyncio.sleep(POLL)
        await self.leases.provision()
        for _ in range(self.runners):
            self.spawn(self.runner())

    # --- the claims worker loop --------------------------------------------------------
    async def runner(self) -> None:
        while True:
            claim = await self.next_claim()
            if claim is None:
                await asyncio.sleep(POLL)
            else:
                await self.run_claimed(claim)

    async def next_claim(self) -> Claim | None:
        try:
            if self.jobs.undecided:
                await self.jobs.give_back_undecided()
            for job in await self.jobs.candidates(4):
                won = await self.jobs.claim(job)
                if won.claim is not None:
                    return won.claim
        except BackendUnavailable:
            pass  # counted by the store (claims-db); the next poll tries again
        return None

    async def work_of(self, claim: Claim) -> float:
        async for _ in backoff():
            with contextlib.suppress(BackendUnavailable):
                job = await self.jobs.get(claim.job_id)
                return float(json.loads(job.payload or "{}").get("work", 0.2)) if job else 0.0
        raise AssertionError("unreachable")  # backoff() never ends

    async def run_claimed(self, claim: Claim) -> None:
        work = await self.work_of(claim)
        execution = uuid.uuid4().hex
        started: bool | None = None  # None: not yet known to have started
        state = "completed"
        while True:
            unanswered = False
            try:
                async with self.leases.hold(wait=LEASE_WAIT):
                    if started is None:
                        try:
                            started = (await self.jobs.start(claim, execution)).started
                        except BackendUnavailable:
                            unanswered = True  # leave the lease: the slot is for work
                    if started:
                        await asyncio.sleep(work)
            except LeaseRejected:  # quota full, or the backend unreachable (an open breaker
                await asyncio.sleep(POLL)  # refuses at once): keep the claim, wait, retry
                continue
            except LeaseLost:
                state = "failed"
            if not unanswered:
                break
            started = await self.start_settled(claim, execution)
        if started:  # False: fenced, the claim moved on; nothing ran, nothing to finish
            await self.finish_sure(claim, execution, state)

    async def start_settled(self, claim: Claim, execution: str) -> bool | None:
        """After a start the database did not answer, wait for it holding no lease: True
        if that start committed, False if the claim moved on (fenced), None: start again."""
        async for _ in backoff():
            with contextlib.suppress(BackendUnavailable):
                row = await self.jobs.get(claim.job_id)
                if row is not None and row.execution_id == execution:
                    return True
                return None if row is not None and row.token == claim.token else False
        raise AssertionError("unreachable")  # backoff() never ends

    async def finish_sure(self, claim: Claim, execution: str, state: Any) -> None:
        async for _ in backoff():
            with contextlib.suppress(BackendUnavailable):
                await self.jobs.finish(claim, execution, state)
                return

    # --- faults on cue -----------------------------------------------------------------
    async def heartbeat_lost(self, seconds: float) -> None:
        with contextlib.suppress(LeaseLost):
            async with self.leases.hold(wait=30):
                time.sleep(seconds)  # noqa: ASYNC251 - the planted fault: a frozen holder
                await asyncio.sleep(self.timeout)

    async def fence(self) -> dict[str, str]:
        claim = await self.jobs.create_local(payload=json.dumps({"work": 0.05}))

        async def start_when_requeued() -> None:
            while True:
                row = await self.jobs.get(claim.job_id)
                if row is not None and row.token != claim.token:
                    break
                await asyncio.sleep(0.05)
            await self.jobs.start(claim)  # counted: fenced

        self.spawn(start_when_requeued())
        return {"job": claim.job_id, "owner": claim.owner}

    async def control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = (await reader.readline()).decode().split()
        reply: dict[str, Any] = {"worker": self.worker}
        if line and line[0] == "heartbeat_lost":
            self.spawn(self.heartbeat_lost(float(line[1])))
        elif line and line[0] == "fence":
            reply.update(await self.fence())
        writer.write(json.dumps(reply).encode() + b"\n")
        await writer.drain()
        writer.close()


async def main() -> None:
    health = install_loop_health()
    pool = Pool()
    await pool.start()
    server = await asyncio.start_server(pool.control, "127.0.0.1",
                                        int(os.environ["MATRIX_CONTROL_PORT"]))
    start_http_server(int(os.environ["MATRIX_METRICS_PORT"]), addr="127.0.0.1")
    print("ready", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        server.close()
        await health.aclose()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
