"""Drill 2's runtime roles: a gateway that accepts tasks on a connection, and executors.

The gateway has one model slot (its capacity). A task arriving on its connection while
the slot is busy either waits for it (``local`` path: execution is pinned to the
connection's worker) or becomes a durable queued job that any idle executor claims
through the real claim protocol (``claim`` path). Wherever a task runs, its executor
appends its events to the durable history and the gateway projects them, in order and
exactly once, onto the client's connection; the final reply is built from the job row.
Every execution records the four stage histograms with the gateway's acceptance time,
so dispatch wait is measured the same way wherever the task ran.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable
from typing import Any, Final

from ..claims import Claim, Job, SqliteJobStore
from ..claims.model import TERMINAL
from ..events import Event, EventHistory, Projector
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


class Runtime:
    """What every worker of drill 2 shares: the job table, event history and stages."""

    def __init__(self, db: str, worker: str) -> None:
        self.worker = worker
        self.jobs = SqliteJobStore(db, worker=worker)
        self.history = EventHistory(db)
        self.recorder = StageRecorder(worker=worker, kinds=KINDS, dependencies=("model",))

    def close(self) -> None:
        self.jobs.close()
        self.history.close()

    async def execute(self, claim: Claim, task: dict[str, Any], accepted_at: float) -> None:
        """Run a claimed task: started CAS, events, model call, terminal write."""
        stages = self.recorder.task(task["kind"], accepted_at=accepted_at, job_id=claim.job_id)
        started = await asyncio.to_thread(self.jobs.start, claim)
        execution = started.execution_id
        if execution is None:
            stages.finish("cancelled")  # fenced: someone reclaimed it; run nothing
            return
        stages.started()

        async def emit(seq: int, kind: str, payload: Any = None) -> None:
            event = Event(claim.job_id, execution, claim.epoch, seq, kind, payload)
            await asyncio.to_thread(self.history.append, event)

        await emit(1, "started", {"worker": self.worker})
        async with stages.external("model"):
            reply = await handlers.fake_model(float(task["seconds"]))
        await emit(2, "token", {"text": reply})
        stages.first_event()
        await emit(3, "completed")
        await asyncio.to_thread(self.jobs.finish, claim, execution, "completed")
        stages.finish("completed")


class Gateway:
    """Accepts newline-delimited JSON tasks on a connection; streams events and a reply."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.slot = asyncio.Semaphore(1)
        self.projector = Projector(self._to_client, worker=rt.worker)
        self._clients: dict[str, tuple[str, asyncio.StreamWriter]] = {}
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

    def _to_client(self, event: Event) -> None:
        task, writer = self._clients[event.job_id]
        writer.write(json.dumps({"task": task, "event": event.type, "seq": event.seq,
                                 "payload": event.payload}).encode() + b"\n")

    async def _serve(self, task: dict[str, Any], accepted_at: float,
                     writer: asyncio.StreamWriter) -> None:
        try:
            if task["path"] == "local" or not self.slot.locked():
                reply = await self._run_local(task, accepted_at, writer)
            else:
                reply = await self._run_queued(task, accepted_at, writer)
        except Exception as exc:  # the client fails at once instead of timing out
            reply = {"task": task.get("task"), "error": f"{type(exc).__name__}: {exc}"}
        writer.write(json.dumps(reply).encode() + b"\n")
        await writer.drain()

    async def _run_local(self, task: dict[str, Any], accepted_at: float,
                         writer: asyncio.StreamWriter) -> dict[str, Any]:
        async with self.slot:
            claim = await asyncio.to_thread(self.rt.jobs.create_local, payload=json.dumps(task))
            running = asyncio.create_task(self.rt.execute(claim, task, accepted_at))
            job = await self._follow(claim.job_id, task, writer)
            await running
        return reply_from_job(job, task, accepted_at, self.rt.worker, "local")

    async def _run_queued(self, task: dict[str, Any], accepted_at: float,
                          writer: asyncio.StreamWriter) -> dict[str, Any]:
        payload = json.dumps({**task, "accepted_at": accepted_at})
        job_id = await asyncio.to_thread(self.rt.jobs.create_job, payload=payload)
        job = await self._follow(job_id, task, writer)
        return reply_from_job(job, task, accepted_at, self.rt.worker, "claimed")

    async def _follow(self, job_id: str, task: dict[str, Any],
                      writer: asyncio.StreamWriter) -> Job:
        """Project the job's events onto the connection until its row is terminal.

        The demo has no live channel (no pub/sub): every event comes from the durable
        history, so only events past the projector's position are offered.
        """
        self._clients[job_id] = (task["task"], writer)
        try:
            while True:
                job = await asyncio.to_thread(self.rt.jobs.get, job_id)
                await self._forward(job_id)
                if job is not None and job.state in TERMINAL:
                    return job
                await asyncio.sleep(POLL_SECONDS)
        finally:
            self.projector.forget(job_id)
            del self._clients[job_id]

    async def _forward(self, job_id: str) -> None:
        pos = self.projector.position(job_id)
        for event in await asyncio.to_thread(self.rt.history.latest, job_id):
            if pos is None or event.epoch != pos[0] or event.seq >= pos[2]:
                self.projector.offer(event)


async def run_gateway(ns: argparse.Namespace, stop: asyncio.Event,
                      announce: Callable[..., None]) -> None:
    rt = await asyncio.to_thread(Runtime, ns.db, ns.worker)
    server = await asyncio.start_server(Gateway(rt).handle, "127.0.0.1", 0)
    announce(port=server.sockets[0].getsockname()[1])
    async with server:
        await stop.wait()
    await asyncio.to_thread(rt.close)


async def run_executor(ns: argparse.Namespace, stop: asyncio.Event,
                       announce: Callable[..., None]) -> None:
    """An idle worker: claim queued jobs (a hint list, then the conditional update)."""
    rt = await asyncio.to_thread(Runtime, ns.db, ns.worker)
    announce()
    while not stop.is_set():
        for job_id in await asyncio.to_thread(rt.jobs.candidates, 10):
            won = await asyncio.to_thread(rt.jobs.claim, job_id)
            if won.claim is None:
                continue  # another executor won the race
            job = await asyncio.to_thread(rt.jobs.get, job_id)
            task = json.loads(job.payload or "{}") if job else {}
            await rt.execute(won.claim, task, float(task["accepted_at"]))
        await asyncio.sleep(POLL_SECONDS)
    await asyncio.to_thread(rt.close)
