"""The owner's side: run an execution under its lease and stop it on a cancel, whichever
way the cancel arrives.

Three paths, fastest first (docs/cancel.md):

- ``pubsub``: a routed command arrives on the owner's channel, passes the re-check of
  job, execution epoch and lease, and the execution is cancelled at once;
- ``marker``: the message was lost, but every lease heartbeat also reads the cancel
  marker, so the execution stops within one heartbeat interval;
- ``lease_expiry``: the owner is gone; nobody here can report it — the requester sees the
  lease expire (``CommandGateway.wait_stopped``).

The re-check is what keeps an old command off a new generation: a command names the
``(job, epoch, execution)`` the gateway read, and it is applied only if the job row, the
local execution and its lease still agree. Otherwise it is counted ``fenced``.

Example (``jobs`` an ``AsyncSqliteJobStore`` / ``AsyncPostgresJobStore``; a sync store
works too, its calls then run in a thread)::

    inbox = CommandInbox(bus, jobs)
    await inbox.start()
    won = await jobs.claim(job_id)
    started = await jobs.start(won.claim)
    lease = await leases.acquire(holder=execution_holder(inbox.owner, started.execution_id))
    stop = await inbox.run(won.claim, started.execution_id, lease, work, heartbeat=5)
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..claims import AsyncJobStore, Claim, JobStore
from ..claims.store import JobsOnLoop
from ..core.guard import absorb
from ..core.lifecycle import AwaitedService, astarts, astops
from ..leases import AsyncLease
from ..observer import CancelPath, CommandOutcome, MetricsObserver, Observer
from .bus import DEFAULT_MARKER_TTL, CancelBus, Command, Subscription

StopState = Literal["completed", "failed", "cancelled", "lost"]
DEFAULT_RECONNECT: Final = 1.0


def absorbed(component: str, exc: BaseException, observer: Observer,
             jobs: JobStore | AsyncJobStore) -> None:
    """Count a transport failure under the observer's worker and registry (a custom observer
    has none: then the job store's), so it lands beside the series of the same component."""
    who = observer if isinstance(observer, MetricsObserver) else jobs
    absorb(component, exc, worker=who.worker, registry=who.registry)


def execution_holder(owner: str, execution_id: str) -> str:
    """The lease holder id of an execution: a gateway can derive it from the job row."""
    return f"{owner}/{execution_id}"


@dataclass(frozen=True)
class Stop:
    """How a run ended; ``path`` and ``latency`` (request → stop) are set for a cancel."""

    state: StopState
    path: CancelPath | None = None
    latency: float | None = None
    result: Any = None
    error: BaseException | None = None


@dataclass(eq=False)
class Execution:
    """A running execution as its owner holds it; ``inputs`` gets applied ``input`` commands."""

    claim: Claim
    execution_id: str
    lease: AsyncLease
    inputs: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)
    #: set once the execution stopped for a cancel: later side effects are late
    acknowledged_at: float | None = None
    _stopping: asyncio.Future[tuple[StopState, CancelPath | None, float | None]] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future())

    def request_stop(self, state: StopState, path: CancelPath | None = None,
                     requested_at: float | None = None) -> None:
        """First request wins; later ones (the marker after the message) are ignored."""
        if not self._stopping.done():
            self._stopping.set_result((state, path, requested_at))


class CommandInbox(AwaitedService):
    """One per owner (worker process): listens on the owner's channel, runs executions.

    ``reconnect`` is the pause after the channel breaks before subscribing again: the
    window in which wake-ups are lost and only the marker stops an execution.
    """

    def __init__(
        self,
        bus: CancelBus,
        jobs: JobStore | AsyncJobStore,
        *,
        observer: Observer | None = None,
        reconnect: float = DEFAULT_RECONNECT,
        ack_ttl: float = DEFAULT_MARKER_TTL,
    ) -> None:
        self.bus = bus
        self.jobs = jobs
        self._jobs = JobsOnLoop(jobs)
        self.owner = jobs.owner
        self.observer = observer or jobs.observer
        self.reconnect = reconnect
        self.ack_ttl = ack_ttl
        self._runs: dict[str, Execution] = {}
        self._sub: Subscription | None = None
        self._listener: asyncio.Task[None] | None = None

    # --- the channel ------------------------------------------------------------------
    @astarts
    async def start(self) -> None:
        """Subscribe now (commands sent after this returns can arrive), then listen.
        Returns the inbox; a second start (or an ``async with`` after it) subscribes once."""
        self._sub = await self.bus.subscribe(self.owner)
        self._listener = asyncio.get_running_loop().create_task(self._listen(0.0))

    async def _close_sub(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
        if self._sub is not None:
            await self._sub.aclose()
            self._sub = None

    async def drop(self, pause: float) -> None:
        """Close the channel and resubscribe after ``pause`` s: a subscriber reconnecting."""
        await self._close_sub()
        self._listener = asyncio.get_running_loop().create_task(self._listen(pause))

    @astops
    async def aclose(self) -> None:
        """Stop listening and close the channel; safe to call twice."""
        await self._close_sub()


    async def _listen(self, delay: float) -> None:
        await asyncio.sleep(delay)
        while True:
            if self._sub is None:
                try:
                    self._sub = await self.bus.subscribe(self.owner)
                except Exception as exc:  # noqa: BLE001 - retried; markers still work
                    absorbed("cancel-subscribe", exc, self.observer, self.jobs)
                    await asyncio.sleep(self.reconnect)
                    continue
            try:
                command = await self._sub.get()
            except Exception as exc:  # noqa: BLE001 - a broken channel is an expected event
                absorbed("cancel-channel", exc, self.observer, self.jobs)
                await self._sub.aclose()
                self._sub = None
                await asyncio.sleep(self.reconnect)
                continue
            await self.deliver(command)

    # --- commands ---------------------------------------------------------------------
    async def deliver(self, command: Command) -> CommandOutcome:
        """Re-check a routed command and apply it, or fence it; counted either way."""
        run = self._runs.get(command.job_id)
        outcome: CommandOutcome = "fenced"
        if run is not None and await self._current(command, run):
            outcome = "applied"
        self.observer.command_routed(outcome)
        if run is not None and outcome == "applied":
            if command.kind == "cancel":
                run.request_stop("cancelled", "pubsub", command.sent_at)
            else:
                run.inputs.put_nowait(command.payload)
        return outcome

    async def _current(self, command: Command, run: Execution) -> bool:
        """Is the command's generation still the one running here, with a live lease?

        The lease is checked by renewing it: a message that waited in a socket buffer
        while this process was frozen past the lease timeout finds the lease reaped.
        """
        if (command.owner != self.owner or command.epoch != run.claim.epoch
                or command.execution_id not in (None, run.execution_id)
                or run.lease.lost or run.acknowledged_at is not None):
            return False
        if not await run.lease.heartbeat():
            run.request_stop("lost")
            return False
        job = await self._jobs.get(command.job_id)
        return (job is not None and job.state == "running" and job.owner == self.owner
                and job.epoch == command.epoch and job.execution_id == run.execution_id)

    # --- executions -------------------------------------------------------------------
    async def run(
        self,
        claim: Claim,
        execution_id: str,
        lease: AsyncLease,
        work: Callable[[Execution], Coroutine[Any, Any, Any]],
        *,
        heartbeat: float,
    ) -> Stop:
        """Run ``work`` until it returns or is stopped; write the terminal state, release.

        Each heartbeat renews the lease and reads the cancel marker. A lost lease stops the
        execution too (the platform already judged it dead). ``heartbeat`` must leave room
        for the store's wait and margin within the lease timeout (``check_heartbeat``):
        a slower one lets another holder take the slot while this work goes on, so it is
        a ``ConfigError`` before anything runs.
        """
        lease.store.check_heartbeat(heartbeat, source="CommandInbox.run heartbeat")
        loop = asyncio.get_running_loop()
        run = Execution(claim, execution_id, lease)
        self._runs[claim.job_id] = run
        task: asyncio.Task[Any] = loop.create_task(work(run))
        beat = loop.create_task(self._beat(run, heartbeat))
        try:
            await asyncio.wait({task, run._stopping}, return_when=asyncio.FIRST_COMPLETED)
            beat.cancel()
            stop = await self._settle(run, task)
        finally:
            beat.cancel()
            task.cancel()
            self._runs.pop(claim.job_id, None)
        try:
            await self._jobs.finish(claim, execution_id, stop.state)
        finally:
            await lease.release()
        return stop

    async def _settle(self, run: Execution, task: asyncio.Task[Any]) -> Stop:
        if task.done():  # finished on its own, even if a stop came in the same instant
            if task.cancelled():
                return Stop("failed", error=asyncio.CancelledError())
            exc = task.exception()
            if exc is not None:
                return Stop("failed", error=exc)
            return Stop("completed", result=task.result())
        state, path, requested_at = run._stopping.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        stopped_at = time.time()
        if state != "cancelled" or path is None or requested_at is None:
            return Stop(state)
        run.acknowledged_at = stopped_at
        latency = stopped_at - requested_at
        self.observer.cancel_delivered(path, latency=latency)
        try:
            await self.bus.acknowledge(run.execution_id, stopped_at, self.ack_ttl)
        except Exception as exc:  # noqa: BLE001 - the local flag still gates side effects
            absorbed("cancel-ack", exc, self.observer, self.jobs)
        return Stop("cancelled", path, latency)

    async def _beat(self, run: Execution, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            if not await run.lease.heartbeat():
                run.request_stop("lost")
                return
            try:
                requested_at = await self.bus.marker(run.execution_id)
            except Exception as exc:  # noqa: BLE001 - next heartbeat tries again
                absorbed("cancel-marker", exc, self.observer, self.jobs)
                continue
            if requested_at is not None:
                run.request_stop("cancelled", "marker", requested_at)
                return

    def running(self) -> list[Execution]:
        return list(self._runs.values())
