"""The job side of ``examples/fastapi_app.py``: what the design's validation workload
needs beside plain requests (docs/loadtest.md, "The example app").

- **Claimed jobs.** ``POST /jobs`` queues a job in a SQLite job table; every worker's
  claim loop takes queued jobs through the claim protocol (conditional update, started
  CAS), runs them under a lease and writes events to the durable history. A job streamed
  to its client (``GET /jobs/stream``) takes the local fast path on the accepting worker
  and its events are projected onto the response.
- **Recovery.** Every worker runs ``JobStore.recover()`` once a second: a SIGKILLed
  worker's running jobs become ``lost`` (never re-run: their side effects may have
  happened) and its claims not yet started go back to the queue for another worker.
- **Cancel.** A client that disconnects from a job stream cancels the job through
  ``CommandGateway``: the marker is written, the owner's ``CommandInbox`` stops the
  execution and acknowledges the cancel. Every side effect (a write to the upstream)
  first asks ``SideEffectGate``; one attempted after the acknowledgement is counted in
  ``corevo_late_side_effects_total`` and refused. ``$EXAMPLE_LATE_WRITE=1`` plants the
  bug that produces them: a write-behind task that outlives its execution.

The database is ``$EXAMPLE_JOBS_DB``, else ``jobs.db`` in ``$COREVO_LOADTEST_DIR`` (the
load test's run directory), else a file in the temp directory named after the server
process, so all workers of one server share it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import AsyncIterator, Coroutine
from typing import Any, Final

import httpx

from corevo_obs.cancel import (
    CommandGateway,
    CommandInbox,
    Execution,
    SideEffectGate,
    SqliteCancelBus,
    execution_holder,
)
from corevo_obs.claims import Claim, SqliteJobStore
from corevo_obs.events import Event, EventHistory, Projector
from corevo_obs.leases import AsyncSqliteLeaseStore

POLL_SECONDS: Final = 0.25  # other workers' jobs; this worker's wake it at once
RECOVER_EVERY: Final = 1.0
HEARTBEAT_SECONDS: Final = 0.5
LATE_WRITE_DELAY: Final = 0.3
log = logging.getLogger("examples.jobs")


def jobs_configured() -> bool:
    """Whether this run names its job database (``corevo-obs loadtest`` does)."""
    return bool(os.environ.get("EXAMPLE_JOBS_DB") or os.environ.get("COREVO_LOADTEST_DIR"))


def jobs_db() -> str:
    explicit = os.environ.get("EXAMPLE_JOBS_DB")
    if explicit:
        return explicit
    run_dir = os.environ.get("COREVO_LOADTEST_DIR")
    if run_dir:
        return os.path.join(run_dir, "jobs.db")
    return os.path.join(tempfile.gettempdir(), f"corevo-example-jobs-{os.getppid()}.db")


class JobRuntime:
    """One per worker: the job table, leases, cancel bus, event history and claim loop."""

    def __init__(self, db: str, upstream: httpx.AsyncClient, upstream_url: str, *,
                 capacity: int = 3) -> None:
        self.jobs = SqliteJobStore(db)
        self.leases = AsyncSqliteLeaseStore("example_jobs", db, limit=64, timeout=5.0,
                                            busy_timeout=1.0)
        self.bus = SqliteCancelBus(db)
        self.history = EventHistory(db)
        self.inbox = CommandInbox(self.bus, self.jobs)
        self.gateway = CommandGateway(self.bus, self.jobs)
        self.gate = SideEffectGate(self.bus, self.jobs.observer)
        self.projector = Projector(self._to_follower, observer=self.jobs.observer)
        self.upstream, self.upstream_url = upstream, upstream_url
        self.capacity = capacity
        self.late_write = os.environ.get("EXAMPLE_LATE_WRITE") == "1"
        self._followers: dict[str, asyncio.Queue[Event | None]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._running = 0
        self._wake = asyncio.Event()

    @classmethod
    async def open(cls, upstream: httpx.AsyncClient, upstream_url: str) -> JobRuntime:
        """Build the stores in a thread (they create tables), then start listening."""
        rt = await asyncio.to_thread(cls, jobs_db(), upstream, upstream_url)
        await rt.inbox.start()
        rt._spawn(rt._claim_loop())
        return rt

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.inbox.aclose()
        await self.bus.aclose()
        await self.leases.aclose()
        await asyncio.to_thread(self.history.close)
        await asyncio.to_thread(self.jobs.close)

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # --- the two ways in --------------------------------------------------------------
    async def submit(self, steps: int, step: float) -> str:
        """Queue a job for whichever worker claims it first."""
        payload = json.dumps({"steps": steps, "step": step})
        job_id = await asyncio.to_thread(self.jobs.create_job, payload=payload)
        self._wake.set()
        return job_id

    async def stream(self, steps: int, step: float) -> tuple[str, AsyncIterator[Event]]:
        """Run a job here (the local fast path) and follow its events until it ends."""
        claim = await asyncio.to_thread(self.jobs.create_local)
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._followers[claim.job_id] = queue
        self._spawn(self._execute(claim, steps, step))

        async def events() -> AsyncIterator[Event]:
            while (event := await queue.get()) is not None:
                yield event

        return claim.job_id, events()

    def cancel_soon(self, job_id: str) -> None:
        """The client went away: cancel its job (from a finally block, so in a task)."""
        self._followers.pop(job_id, None)
        self._spawn(self.gateway.cancel(job_id))

    def _to_follower(self, event: Event) -> None:
        queue = self._followers.get(event.job_id)
        if queue is not None:
            queue.put_nowait(event)

    # --- executing ---------------------------------------------------------------------
    async def _claim_loop(self) -> None:
        last_recovery = 0.0
        while True:
            try:
                if time.monotonic() - last_recovery >= RECOVER_EVERY:
                    last_recovery = time.monotonic()
                    await asyncio.to_thread(self.jobs.recover)
                room = self.capacity - self._running  # streamed jobs run here anyway
                for job_id in await asyncio.to_thread(self.jobs.candidates, room) \
                        if room > 0 else []:
                    won = await asyncio.to_thread(self.jobs.claim, job_id)
                    job = await asyncio.to_thread(self.jobs.get, job_id) if won.claim else None
                    if won.claim is not None and job is not None:
                        spec = json.loads(job.payload or "{}")
                        self._spawn(self._execute(won.claim, int(spec.get("steps", 3)),
                                                  float(spec.get("step", 0.1))))
            except Exception:  # a busy database: try again at the next poll
                log.exception("claim loop")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), POLL_SECONDS)
            self._wake.clear()

    async def _execute(self, claim: Claim, steps: int, step: float) -> None:
        """Started CAS, lease, run under the inbox (which writes the terminal state)."""
        self._running += 1
        try:
            started = await asyncio.to_thread(self.jobs.start, claim)
            execution = started.execution_id
            if execution is None:
                return  # fenced: someone reclaimed it meanwhile; run nothing
            lease = await self.leases.acquire(holder=execution_holder(self.inbox.owner, execution))
            if lease is None:
                await asyncio.to_thread(self.jobs.finish, claim, execution, "failed")
                return

            async def work(run: Execution) -> None:
                await self._work(run, steps, step)

            await self.inbox.run(claim, execution, lease, work, heartbeat=HEARTBEAT_SECONDS)
        finally:
            self._running -= 1
            queue = self._followers.pop(claim.job_id, None)
            if queue is not None:
                queue.put_nowait(None)
            self.projector.forget(claim.job_id)

    async def _work(self, run: Execution, steps: int, step: float) -> None:
        for seq in range(1, steps + 1):
            await asyncio.sleep(step)
            key = f"{run.execution_id}:{seq}"
            if self.late_write:  # the planted bug: a write-behind task nobody cancels
                self._spawn(self._write_later(key))
            else:
                await self._write(key)
            event = Event(run.claim.job_id, run.execution_id, run.claim.epoch, seq, "step",
                          {"of": steps})
            await asyncio.to_thread(self.history.append, event)
            if event.job_id in self._followers:
                self.projector.offer(event)

    async def _write(self, key: str) -> None:
        """A side effect: asks the gate first, so one after an acknowledged cancel counts."""
        if await self.gate.allowed(key):
            await self.upstream.post(self.upstream_url, content=key.encode())

    async def _write_later(self, key: str) -> None:
        await asyncio.sleep(LATE_WRITE_DELAY)
        with contextlib.suppress(httpx.HTTPError):
            await self._write(key)
