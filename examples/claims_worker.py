"""A claims worker loop: find candidates, claim, start, run, finish with retry, and
recover on a cadence, paused owners included (docs/leases-claims.md, "A worker loop").

Run one worker per process (or several per loop) against one job table::

    python -m examples.claims_worker sqlite:///tmp/jobs.db       # or a postgresql:// DSN

``tests/test_claims_worker.py`` runs this code against real SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from corevo_obs.claims import AsyncJobStore, Claim, Job
from corevo_obs.core.errors import BackendUnavailable
from corevo_obs.observer import TerminalState

Run = Callable[[Job], Awaitable[None]]


@dataclass(frozen=True)
class Cadence:
    """How often and how strictly the worker looks after the table.

    ``claim_ttl``: a claim not started within it is requeued, whoever holds it (a paused
    owner's later ``start`` is then fenced). ``run_limit``: a job running longer is marked
    ``timeout`` and never re-run (a paused or dead owner's ``finish`` then returns False).
    Keep ``run_limit`` above your longest job.
    """

    poll: float = 0.5
    batch: int = 10
    recover_every: float = 10.0
    claim_ttl: float = 30.0
    run_limit: float = 600.0
    finish_attempts: int = 6
    finish_pause: float = 0.25


async def finish_with_retry(jobs: AsyncJobStore, claim: Claim, execution_id: str,
                            state: TerminalState, cadence: Cadence = Cadence()) -> bool:
    """True when the job ended in ``state`` by this execution; False when the platform
    had already ended it (recovery marked it ``timeout``/``lost``: it was superseded).
    A database outage (``BackendUnavailable``) is retried with backoff, then raised."""
    for attempt in range(cadence.finish_attempts):
        try:
            if await jobs.finish(claim, execution_id, state):
                return True
            # a retry after a lost reply finds the row already finished: by whom?
            job = await jobs.get(claim.job_id)
            return job is not None and job.execution_id == execution_id and job.state == state
        except BackendUnavailable:
            if attempt + 1 == cadence.finish_attempts:
                raise
            await asyncio.sleep(cadence.finish_pause * 2 ** attempt)
    return False


async def work_once(jobs: AsyncJobStore, run: Run, cadence: Cadence = Cadence()) -> int:
    """One pass over the queued jobs: the ones this worker won and ran."""
    ran = 0
    for job_id in await jobs.candidates(limit=cadence.batch):  # a hint: the claim decides
        won = await jobs.claim(job_id)
        if won.claim is None:
            continue                               # another worker won it
        execution_id = uuid.uuid4().hex
        if not (await jobs.start(won.claim, execution_id)).started:
            continue                               # fenced: requeued while we were paused
        job = await jobs.get(job_id)
        state: TerminalState = "completed"
        try:
            assert job is not None
            await run(job)                         # side effects only after start
        except Exception:  # noqa: BLE001 - the job's own failure is its terminal state
            state = "failed"
        await finish_with_retry(jobs, won.claim, execution_id, state, cadence)
        ran += 1
    return ran


async def recover(jobs: AsyncJobStore, cadence: Cadence = Cadence(),
                  clock: Callable[[], float] = time.time) -> int:
    """Owners proven gone (same host: by pid), then the time bounds that also cover an
    owner that is alive but paused (SIGSTOP, a frozen loop, a partition); returns the
    jobs it touched."""
    gone = await jobs.recover()
    now = clock()
    stale = await jobs.reclaim_prestart(claimed_before=now - cadence.claim_ttl)
    overdue = await jobs.mark_lost(started_before=now - cadence.run_limit, state="timeout")
    undecided = await jobs.give_back_undecided()   # claims whose reply this store lost
    return gone.reclaimed + gone.lost + stale + overdue + undecided


async def worker_loop(jobs: AsyncJobStore, run: Run, stop: asyncio.Event,
                      cadence: Cadence = Cadence()) -> int:
    """Until ``stop`` is set: recover every ``recover_every`` s, run what can be won,
    wait ``poll`` s when nothing was. A database outage pauses the pass, not the loop."""
    ran, next_recovery = 0, 0.0
    while not stop.is_set():
        try:
            if time.monotonic() >= next_recovery:
                await recover(jobs, cadence)
                next_recovery = time.monotonic() + cadence.recover_every
            done = await work_once(jobs, run, cadence)
        except BackendUnavailable:
            done = 0                               # counted by the store; try again later
        ran += done
        if not done:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), cadence.poll)
    return ran


async def _print_payload(job: Job) -> None:
    print(job.id, job.payload)


async def main(store: AsyncJobStore) -> None:
    async with store as jobs:
        await worker_loop(jobs, _print_payload, asyncio.Event())


if __name__ == "__main__":
    from .worker_pool import open_store  # before the loop: its import is no stall

    asyncio.run(main(open_store(sys.argv[1])))
