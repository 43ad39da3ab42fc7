"""The requester's side: read the current owner, route the command, watch the stop.

A gateway never decides that a command applied — only the owner's re-check can — so
``route`` answers with what it knows: which generation it addressed, and how many
receivers the wake-up reached (0 means the marker alone carries a cancel). When the owner
is gone for good, the gateway is the one that sees it: ``wait_stopped`` notices the
execution's lease expire and counts the cancel as delivered by ``lease_expiry``.

Example::

    gw = CommandGateway(bus, jobs)
    routed = await gw.cancel(job_id)
    outcome = await gw.wait_stopped(routed, leases, within=60)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from ..claims import AsyncJobStore, JobStore
from ..claims.model import TERMINAL
from ..claims.store import JobsOnLoop
from ..leases import AsyncLeaseStore
from ..observer import CancelPath, Observer
from .bus import DEFAULT_MARKER_TTL, CancelBus, Command, CommandKind
from .owner import absorbed, execution_holder

RouteOutcome = Literal["routed", "no_owner", "cancelled_queued"]


@dataclass(frozen=True)
class Target:
    """The generation a gateway read: the owner and the epoch/execution it runs."""

    job_id: str
    owner: str
    epoch: int
    execution_id: str | None


@dataclass(frozen=True)
class Routed:
    outcome: RouteOutcome
    command: Command | None = None
    #: receivers the wake-up reached; 0 = lost, only the marker carries a cancel
    reached: int = 0


@dataclass(frozen=True)
class Stopped:
    """What the requester saw: a terminal state, a lease that expired, or nothing yet."""

    state: str
    path: CancelPath | None = None
    latency: float | None = None


class CommandGateway:
    """Routes cancels and inputs to the owner recorded in the job table."""

    def __init__(
        self,
        bus: CancelBus,
        jobs: JobStore | AsyncJobStore,
        *,
        observer: Observer | None = None,
        marker_ttl: float = DEFAULT_MARKER_TTL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.bus = bus
        self.jobs = jobs
        self._jobs = JobsOnLoop(jobs)
        self.observer = observer or jobs.observer
        self.marker_ttl = marker_ttl
        self.clock = clock

    async def lookup(self, job_id: str) -> Target | None:
        """The current owner and generation, or None when nobody owns a live execution."""
        job = await self._jobs.get(job_id)
        if job is None or job.owner is None or job.state in TERMINAL:
            return None
        return Target(job.id, job.owner, job.epoch, job.execution_id)

    async def route(self, target: Target | None, kind: CommandKind,
                    payload: str | None = None) -> Routed:
        """Send a command to the generation ``target`` names (as read, maybe stale).

        For a cancel the marker is written first and a failure to write it is raised: a
        cancel that is not durable must not be reported as requested.
        """
        if target is None:
            self.observer.command_routed("no_owner")
            return Routed("no_owner")
        now = self.clock()
        command = Command(kind, target.job_id, target.owner, target.epoch,
                          target.execution_id, now, payload)
        if kind == "cancel" and target.execution_id is not None:
            await self.bus.mark(target.execution_id, now, self.marker_ttl)
            self.observer.cancel_requested()
        try:
            reached = await self.bus.send(command)
        except Exception as exc:  # noqa: BLE001 - the wake-up is best effort by design
            absorbed("cancel-send", exc, self.observer, self.jobs)
            reached = 0
        return Routed("routed", command, reached)

    async def send_input(self, job_id: str, payload: str) -> Routed:
        return await self.route(await self.lookup(job_id), "input", payload)

    async def cancel(self, job_id: str) -> Routed:
        """Cancel a job: a queued one in the table, a running one through its owner."""
        job = await self._jobs.get(job_id)
        if job is not None and job.state == "queued":
            if await self._jobs.cancel_queued(job_id):
                self.observer.cancel_requested()
                return Routed("cancelled_queued")
        return await self.route(await self.lookup(job_id), "cancel")  # started meanwhile

    async def wait_stopped(self, routed: Routed, leases: AsyncLeaseStore, *,
                           within: float, poll: float = 0.05) -> Stopped:
        """Wait until the execution reaches a terminal state or its lease expires.

        A lease that expired (or was reaped) while the job still runs means the owner is
        gone: the slot comes back and the cancel counts as delivered by ``lease_expiry``.
        """
        command = routed.command
        if command is None or command.execution_id is None:
            return Stopped(routed.outcome)
        holder = execution_holder(command.owner, command.execution_id)
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            job = await self._jobs.get(command.job_id)
            if job is None or job.state in TERMINAL:
                return Stopped(job.state if job else "gone")
            beat = dict(await leases.holders()).get(holder)
            # heartbeats carry the backend's clock: judge their age by it, not by ours
            if beat is None or await leases.server_time() - beat > leases.timeout:
                now = self.clock()
                job = await self._jobs.get(command.job_id)
                if job is None or job.state in TERMINAL:  # it finished and released meanwhile
                    return Stopped(job.state if job else "gone")
                latency = now - command.sent_at
                self.observer.cancel_delivered("lease_expiry", latency=latency)
                return Stopped("lease_expired", "lease_expiry", latency)
            await asyncio.sleep(poll)
        return Stopped("unknown")


class SideEffectGate:
    """Checks a write's idempotency key against cancels its execution acknowledged.

    A host calls ``allowed`` before (or where it receives) a side effect; a key that names
    an execution which already stopped for a cancel is a late side effect: counted, and
    the answer is False so the host can refuse it. Keys look like ``<execution_id>:<n>``
    unless ``execution_of`` says otherwise.
    """

    def __init__(self, bus: CancelBus, observer: Observer, *,
                 execution_of: Callable[[str], str] = lambda key: key.rsplit(":", 1)[0]) -> None:
        self.bus = bus
        self.observer = observer
        self.execution_of = execution_of

    async def allowed(self, idempotency_key: str) -> bool:
        if await self.bus.acknowledged(self.execution_of(idempotency_key)) is None:
            return True
        self.observer.late_side_effect()
        return False
