"""Drill 2's runtime roles: a gateway that accepts tasks on a connection, and executors.

The gateway has one model slot (its capacity). A task arriving on its connection while
the slot is busy either waits for it (``local`` path: execution is pinned to the
connection's worker) or becomes a durable queued job that any idle executor claims
through the real claim protocol (``claim`` path). Every execution records the four
stage histograms with the gateway's acceptance time, so dispatch wait is measured the
same way wherever the task ran; the reply is built from the job row (durable facts).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from typing import Any, Final

from ..claims import Claim, Job, JobStore, SqliteJobStore
from ..claims.model import TERMINAL
from ..leases import HolderId
from ..stages import StageRecorder
from . import handlers

POLL_SECONDS: Final = 0.02
KINDS: Final = ("long", "short")


def _owner_worker(owner: str | None) -> str | None:
    parsed = HolderId.parse(owner) if owner else None
    return parsed.worker if parsed else owner


def reply_from_job(job: Job, task: dict[str, Any], accepted_at: float, accepted_by: str,
                   path: str) -> dict[str, Any]:
    """What happened to one task, read from its job row (wall-clock seconds)."""
    def since(t: float | None) -> float | None:
        return None if t is None else round(max(0.0, t - accepted_at), 4)

    return {
        "task": task["task"], "kind": task["kind"], "path": path, "state": job.state,
        "accepted_by": accepted_by, "executed_by": _owner_worker(job.owner),
        "queue_wait_seconds": since(job.claimed_at),
        "dispatch_seconds": since(job.execution_started_at),
        "total_seconds": since(job.finished_at),
    }


async def execute(jobs: JobStore, recorder: StageRecorder, claim: Claim,
                  task: dict[str, Any], accepted_at: float) -> None:
    """Run a claimed task: started CAS, model call, terminal write; stages recorded."""
    stages = recorder.task(task["kind"], accepted_at=accepted_at, job_id=claim.job_id)
    started = await asyncio.to_thread(jobs.start, claim)
    if started.execution_id is None:
        stages.finish("cancelled")  # fenced: someone reclaimed it; run nothing
        return
    stages.started()
    async with stages.external("model"):
        await handlers.fake_model(float(task["seconds"]))
    stages.first_event()
    await asyncio.to_thread(jobs.finish, claim, started.execution_id, "completed")
    stages.finish("completed")


class Gateway:
    """Accepts newline-delimited JSON tasks on a connection and answers each one."""

    def __init__(self, jobs: JobStore, recorder: StageRecorder, worker: str) -> None:
        self.jobs = jobs
        self.recorder = recorder
        self.worker = worker
        self.slot = asyncio.Semaphore(1)
        self._tasks: set[asyncio.Task[None]] = set()

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                accepted_at = time.time()
                t = asyncio.create_task(self._serve(json.loads(line), accepted_at, writer))
                self._tasks.add(t)
                t.add_done_callback(self._tasks.discard)
            await asyncio.gather(*self._tasks, return_exceptions=True)
        finally:
            writer.close()

    async def _serve(self, task: dict[str, Any], accepted_at: float,
                     writer: asyncio.StreamWriter) -> None:
        if task["path"] == "local" or not self.slot.locked():
            reply = await self._run_local(task, accepted_at)
        else:
            reply = await self._run_queued(task, accepted_at)
        writer.write(json.dumps(reply).encode() + b"\n")
        await writer.drain()

    async def _run_local(self, task: dict[str, Any], accepted_at: float) -> dict[str, Any]:
        async with self.slot:
            claim = await asyncio.to_thread(self.jobs.create_local, payload=json.dumps(task))
            await execute(self.jobs, self.recorder, claim, task, accepted_at)
        job = await asyncio.to_thread(self.jobs.get, claim.job_id)
        assert job is not None
        return reply_from_job(job, task, accepted_at, self.worker, "local")

    async def _run_queued(self, task: dict[str, Any], accepted_at: float) -> dict[str, Any]:
        payload = json.dumps({**task, "accepted_at": accepted_at})
        job_id = await asyncio.to_thread(self.jobs.create_job, payload=payload)
        while True:
            job = await asyncio.to_thread(self.jobs.get, job_id)
            if job is not None and job.state in TERMINAL:
                return reply_from_job(job, task, accepted_at, self.worker, "claimed")
            await asyncio.sleep(POLL_SECONDS)


def _stores(ns: argparse.Namespace) -> tuple[JobStore, StageRecorder]:
    jobs = SqliteJobStore(ns.db, worker=ns.worker)
    return jobs, StageRecorder(worker=ns.worker, kinds=KINDS, dependencies=("model",))


async def run_gateway(ns: argparse.Namespace, stop: asyncio.Event,
                      announce: Callable[..., None]) -> None:
    jobs, recorder = await asyncio.to_thread(_stores, ns)
    gateway = Gateway(jobs, recorder, ns.worker)
    server = await asyncio.start_server(gateway.handle, "127.0.0.1", 0)
    announce(port=server.sockets[0].getsockname()[1])
    async with server:
        await stop.wait()
    await asyncio.to_thread(jobs.close)


async def run_executor(ns: argparse.Namespace, stop: asyncio.Event,
                       announce: Callable[..., None]) -> None:
    """An idle worker: claim queued jobs (a hint list, then the conditional update)."""
    jobs, recorder = await asyncio.to_thread(_stores, ns)
    announce()
    while not stop.is_set():
        for job_id in await asyncio.to_thread(jobs.candidates, 10):
            won = await asyncio.to_thread(jobs.claim, job_id)
            if won.claim is None:
                continue  # another executor won the race
            job = await asyncio.to_thread(jobs.get, job_id)
            task = json.loads(job.payload or "{}") if job else {}
            await execute(jobs, recorder, won.claim, task, float(task["accepted_at"]))
        await asyncio.sleep(POLL_SECONDS)
    await asyncio.to_thread(jobs.close)
