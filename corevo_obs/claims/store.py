"""The job table behind the claim protocol (docs/leases-claims.md), on any SQL backend.

One core, two thin I/O shells. ``_JobCore`` holds the whole protocol — which statement
to send, what its rows and row count mean, what to report to the observer, how to read
back a write whose reply was lost — as generator functions that *yield* the statements
they need and receive their results: the core never does I/O itself. ``JobStore`` drives
them with a blocking ``Database`` (threads, scripts); ``AsyncJobStore`` drives the very
same generators with an ``AsyncDatabase`` (``await``, never blocking the event loop).
So the two APIs cannot drift apart: semantics, fencing, metrics and errors are written
once.

Every call is one short autocommit statement: no transaction is ever held across remote
work, which is the point of conditional updates.

Database errors are raised to the caller (a claim that cannot be decided must not be
guessed); only the reporting is guarded, by ``MetricsObserver`` itself. A server out of
reach is a ``BackendUnavailable``, counted in ``corevo_instrumentation_errors_total
{component="claims-db"}``. When the connection died after the statement was sent, the
reply is lost but the write may have been applied: claim, start and finish then read the
row back, and only their own token / execution id in it makes them report success. A
retry can never win twice: the claim's WHERE admits only an ownerless row. An async
claim cancelled while its statement was in flight is undecided the same way (the
statement may still commit): its token is kept for ``give_back_undecided``.

Example (threads and scripts)::

    jobs = SqliteJobStore("/var/lib/app/jobs.db")
    job_id = jobs.create_job(payload='{"prompt": "hi"}')
    won = jobs.claim(job_id)                        # on an idle worker
    if won.claim and jobs.start(won.claim, "exec-1").started:
        ...                                         # side effects only after this
        jobs.finish(won.claim, "exec-1", "completed")

On an event loop, the same calls are awaited on ``AsyncSqliteJobStore`` /
``AsyncPostgresJobStore``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry

from ..core.errors import BackendUnavailable, ConfigError
from ..core.guard import absorb
from ..core.lifecycle import AsyncClosing, Closing
from ..core.marker import blocking
from ..core.telemetry import HasTelemetry, Telemetry
from ..leases.holder import HolderIds, holder_alive
from ..observer import MetricsObserver, Observer, TerminalState
from . import sql
from .model import Claim, ClaimOutcome, Job, Recovery, StartOutcome

Rows = list[tuple[Any, ...]]
T = TypeVar("T")


@dataclass(frozen=True)
class Statement:
    """One statement the core needs run: the template (``{t}`` filled) and its params."""

    text: str
    params: Mapping[str, Any]


@dataclass(frozen=True)
class OffLoop:
    """A blocking call the core needs made (e.g. reading /proc): in a thread when async."""

    fn: Callable[[], Any]


#: a core operation: yields what it needs done, receives the result, returns its outcome
Step = Generator[Statement | OffLoop, Any, T]


class Database(Closing, ABC):
    """One connection in autocommit mode; ``run`` executes one statement."""

    @abstractmethod
    def run(self, statement: str, params: Mapping[str, Any]) -> tuple[Rows, int]:
        """Rows (for RETURNING/SELECT) and the affected row count."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection."""


class AsyncDatabase(ABC):
    """``Database`` for an event loop: ``run`` is awaited and never blocks the loop."""

    @abstractmethod
    async def run(self, statement: str, params: Mapping[str, Any]) -> tuple[Rows, int]:
        """Rows (for RETURNING/SELECT) and the affected row count."""

    @abstractmethod
    async def aclose(self) -> None:
        """Close the connection(s)."""


class _JobCore(HasTelemetry):
    """The protocol without I/O: every ``_op`` is a ``Step`` a shell drives."""

    def __init__(
        self,
        *,
        table: str = "corevo_jobs",
        owner: str | None = None,
        observer: Observer | None = None,
        worker: str | None = None,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.table = sql.check_table(table)
        if registry is None and isinstance(observer, MetricsObserver):
            registry = observer.registry  # failures are counted where the observer writes
        self._telemetry = Telemetry.resolve(worker, registry)
        self._telemetry.zero_counters("claims-store")
        #: this process's owner id; names the pid so a recovery pass can tell it is gone
        self.owner = owner or HolderIds(self.worker).new()
        self.observer = observer or MetricsObserver(
            worker=self.worker, registry=self.registry)
        self.clock = clock
        #: job -> token of a claim sent whose outcome never came back (see give_back_undecided)
        self.undecided: dict[str, str] = {}

    def _sql(self, template: str, **params: Any) -> Statement:
        return Statement(template.format(t=self.table), params)

    def _failed(self, exc: BaseException) -> None:
        """What a shell does with an I/O error before throwing it into the step."""
        if isinstance(exc, BackendUnavailable):
            absorb("claims-db", exc, telemetry=self._telemetry)

    def _count(self, name: str, value: float, **labels: str) -> None:
        """A counter's increment or a gauge's value, written by the store itself; a
        metrics failure is absorbed (the job's outcome never depends on it)."""
        try:
            m = self._telemetry.child(name, **labels)
            if name.endswith("_total"):
                m.inc(value)
            else:
                m.set(value)
        except Exception as exc:  # noqa: BLE001
            absorb("claims-metrics", exc, telemetry=self._telemetry)

    def _schema(self) -> Step[None]:
        for statement in (sql.SCHEMA, sql.INDEX):
            yield self._sql(statement)

    def _applied(self, exc: BackendUnavailable, job_id: str,
                 ours: Callable[[Job], bool]) -> Step[Job | None]:
        """After a lost reply: the row, if it carries this attempt's own identity.

        Only when the connection died on its own (``bound`` None): a server that let a
        deadline pass would not answer the read either, and waiting again would double
        the caller's bound.
        """
        if not exc.maybe_committed or exc.bound is not None:
            return None
        try:
            job = yield from self._get(job_id)
        except BackendUnavailable:
            return None
        return job if job is not None and ours(job) else None

    # --- creating ---------------------------------------------------------------------
    def _create_job(self, job_id: str | None, payload: str | None) -> Step[str]:
        job_id = job_id or uuid.uuid4().hex
        yield self._sql(sql.INSERT, job=job_id, now=self.clock(), payload=payload)
        self.observer.dispatch_path("queued")
        return job_id

    def _create_local(self, job_id: str | None, payload: str | None,
                      owner: str | None) -> Step[Claim]:
        job_id = job_id or uuid.uuid4().hex
        owner = owner or self.owner
        token = uuid.uuid4().hex
        now = self.clock()
        yield self._sql(sql.INSERT_CLAIMED, job=job_id, now=now, payload=payload,
                        owner=owner, token=token)
        self.observer.dispatch_path("local")
        self.observer.claim("won", queue_wait=0.0)
        return Claim(job_id, owner, 1, token, now)

    # --- the protocol ---------------------------------------------------------------
    def _claim(self, job_id: str, owner: str | None) -> Step[ClaimOutcome]:
        owner = owner or self.owner
        token = uuid.uuid4().hex
        now = self.clock()
        try:
            rows, _ = yield self._sql(sql.CLAIM, job=job_id, owner=owner, now=now,
                                      token=token)
        except asyncio.CancelledError:
            self.undecided[job_id] = token   # the statement may still commit
            raise
        except BackendUnavailable as exc:
            job = yield from self._applied(
                exc, job_id, lambda j: j.token == token and j.owner == owner)
            if job is None:
                if exc.maybe_committed:
                    self.undecided[job_id] = token
                raise
            rows = [(job.epoch, job.created_at)]
        if not rows:
            self.observer.claim("lost")
            return ClaimOutcome(job_id, None)
        epoch, created_at = rows[0]
        self.observer.claim("won", queue_wait=now - float(created_at))
        return ClaimOutcome(job_id, Claim(job_id, owner, int(epoch), token, now))

    def _start(self, claim: Claim, execution_id: str | None) -> Step[StartOutcome]:
        execution_id = execution_id or uuid.uuid4().hex
        now = self.clock()
        try:
            _, n = yield self._sql(sql.START, job=claim.job_id, owner=claim.owner,
                                   epoch=claim.epoch, token=claim.token,
                                   execution=execution_id, now=now)
        except BackendUnavailable as exc:
            if (yield from self._applied(exc, claim.job_id, lambda j: j.token == claim.token
                                         and j.execution_id == execution_id)) is None:
                raise
            n = 1
        if n != 1:
            self.observer.started("fenced")
            return StartOutcome(claim.job_id, None)
        self.observer.started("started", claim_to_start=now - claim.claimed_at)
        return StartOutcome(claim.job_id, execution_id)

    def _finish(self, claim: Claim, execution_id: str, state: TerminalState) -> Step[bool]:
        n: int  # the rowcount the shell sends back (a Step's send type is Any)
        try:
            _, n = yield self._sql(sql.FINISH, job=claim.job_id, owner=claim.owner,
                                   epoch=claim.epoch, token=claim.token,
                                   execution=execution_id, state=state, now=self.clock())
        except BackendUnavailable as exc:
            if (yield from self._applied(exc, claim.job_id, lambda j: j.execution_id
                                         == execution_id and j.token == claim.token
                                         and j.state == state)) is None:
                self._count("corevo_job_finish_errors_total", 1)
                raise
            n = 1
        self.observer.terminal(state, n)
        return n == 1

    def _cancel_queued(self, job_id: str) -> Step[bool]:
        n: int  # the rowcount the shell sends back (a Step's send type is Any)
        _, n = yield self._sql(sql.CANCEL_QUEUED, job=job_id, now=self.clock())
        self.observer.terminal("cancelled", n)
        return n == 1

    # --- recovery ---------------------------------------------------------------------
    def _reclaim_prestart(self, owner: str | None,
                          claimed_before: float | None) -> Step[int]:
        template = sql.RECLAIM
        params: dict[str, Any] = {}  # SQL parameters of mixed types, as Database.run takes
        if owner is not None:
            template, params["owner"] = template + sql.BY_OWNER, owner
        if claimed_before is not None:
            template, params["before"] = template + sql.CLAIMED_BEFORE, claimed_before
        if not params:
            raise ConfigError("reclaim_prestart needs owner= or claimed_before=")
        n: int  # the rowcount the shell sends back (a Step's send type is Any)
        _, n = yield self._sql(template, **params)
        self.observer.reclaimed(n)
        return n

    def _give_back_undecided(self) -> Step[int]:
        n = 0
        for job_id, token in list(self.undecided.items()):
            _, given = yield self._sql(sql.GIVE_BACK, job=job_id, token=token)
            self.undecided.pop(job_id, None)
            n += given
        if n:
            self.observer.reclaimed(n)
        return n

    def _mark_lost(self, owner: str | None, started_before: float | None,
                   state: TerminalState) -> Step[int]:
        if state not in ("lost", "timeout"):
            raise ConfigError(f"mark_lost writes lost or timeout, not {state!r}")
        template = sql.MARK_LOST
        params: dict[str, Any] = {"state": state, "now": self.clock()}
        if owner is not None:
            template, params["owner"] = template + sql.BY_OWNER, owner
        if started_before is not None:
            template, params["before"] = template + sql.STARTED_BEFORE, started_before
        if len(params) == 2:
            raise ConfigError("mark_lost needs owner= or started_before=")
        n: int  # the rowcount the shell sends back (a Step's send type is Any)
        _, n = yield self._sql(template, **params)
        self.observer.terminal(state, n)
        return n

    def _recover(self, alive: Callable[[str], bool | None]) -> Step[Recovery]:
        rows, _ = yield self._sql(sql.OWNERS)
        owners = [owner for (owner,) in rows]
        # ``alive`` reads /proc (holder_alive): one off-loop call for all owners
        verdicts = yield OffLoop(lambda: [alive(o) for o in owners])
        reclaimed = lost = 0
        for owner, verdict in zip(owners, verdicts, strict=True):
            if verdict is False:
                reclaimed += yield from self._reclaim_prestart(owner, None)
                lost += yield from self._mark_lost(owner, None, "lost")
        # what recovery leaves: jobs of live owners, finishes that were lost
        rows, _ = yield self._sql(sql.OLDEST_RUNNING)
        started = rows[0][0] if rows else None
        self._count("corevo_job_running_oldest_seconds",
                    0.0 if started is None else max(0.0, self.clock() - float(started)),
                    table=self.table)
        return Recovery(reclaimed, lost)

    # --- reading ----------------------------------------------------------------------
    def _candidates(self, limit: int) -> Step[list[str]]:
        rows, _ = yield self._sql(sql.CANDIDATES, n=limit)
        return [r[0] for r in rows]

    def _get(self, job_id: str) -> Step[Job | None]:
        rows, _ = yield self._sql(sql.GET, job=job_id)
        return Job(*rows[0]) if rows else None


class JobStore(_JobCore, Closing):
    """Create, claim, start, finish and recover jobs; one observer call per outcome.

    The blocking shell over ``_JobCore``: for threads and scripts. Every method that
    talks to the database is ``@blocking``; on an event loop use ``AsyncJobStore``.
    ``table`` is the jobs table, ``owner`` this process's owner id (default: a new one
    naming the pid, which ``recover`` needs), ``observer`` receives every outcome
    (default: the metrics of ``worker`` / ``registry``); ``clock`` is for tests.
    """

    def __init__(self, db: Database, *, table: str = "corevo_jobs",
                 owner: str | None = None, observer: Observer | None = None,
                 worker: str | None = None, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(table=table, owner=owner, observer=observer, worker=worker,
                         registry=registry, clock=clock)
        self.db = db
        self._drive(self._schema())

    def _drive(self, step: Step[T]) -> T:
        """Run one core operation to its outcome with blocking I/O."""
        try:
            effect = next(step)
            while True:
                try:
                    if isinstance(effect, OffLoop):
                        result = effect.fn()
                    else:
                        result = self.db.run(effect.text, effect.params)
                except BaseException as exc:
                    self._failed(exc)
                    effect = step.throw(exc)
                else:
                    effect = step.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    @blocking
    def create_job(self, job_id: str | None = None, payload: str | None = None) -> str:
        """Persist a queued, ownerless job (the input an idle worker will need)."""
        return self._drive(self._create_job(job_id, payload))

    @blocking
    def create_local(self, job_id: str | None = None, payload: str | None = None,
                     *, owner: str | None = None) -> Claim:
        """The local fast path: the accepting worker has room, so it owns the job at once.

        The job still gets a row and a claim, so cancel, recovery and the started CAS
        work the same; it just never waits in the queue.
        """
        return self._drive(self._create_local(job_id, payload, owner))

    @blocking
    def claim(self, job_id: str, *, owner: str | None = None) -> ClaimOutcome:
        """One conditional update; exactly one concurrent caller gets ``won``."""
        return self._drive(self._claim(job_id, owner))

    @blocking
    def start(self, claim: Claim, execution_id: str | None = None) -> StartOutcome:
        """The started CAS: binds an execution only if owner, epoch and token still match.

        ``fenced`` (0 rows) means this claim was reclaimed while its owner was away: the
        caller must not run anything.
        """
        return self._drive(self._start(claim, execution_id))

    @blocking
    def finish(self, claim: Claim, execution_id: str, state: TerminalState) -> bool:
        """Executor's terminal write, fenced by its own execution identity."""
        return self._drive(self._finish(claim, execution_id, state))

    @blocking
    def cancel_queued(self, job_id: str) -> bool:
        """Cancel a job that never started (claimed or not); a running one is not touched."""
        return self._drive(self._cancel_queued(job_id))

    @blocking
    def reclaim_prestart(self, *, owner: str | None = None,
                         claimed_before: float | None = None) -> int:
        """Requeue claims not yet started, of ``owner`` and/or older than ``claimed_before``."""
        return self._drive(self._reclaim_prestart(owner, claimed_before))

    @blocking
    def give_back_undecided(self) -> int:
        """Requeue the claims this store sent but never learned the outcome of.

        Such a claim may have committed after its reply was lost (or after the client gave
        up on a frozen server, or after an async caller was cancelled): the row then names
        this owner with a token nobody holds. Call this once the server answers again; a
        claim that never committed matches nothing. One still unreachable stays listed
        for the next call. ``reclaim_prestart(claimed_before=...)`` remains the backstop
        for a late commit.
        """
        return self._drive(self._give_back_undecided())

    @blocking
    def mark_lost(self, *, owner: str | None = None, started_before: float | None = None,
                  state: TerminalState = "lost") -> int:
        """Running jobs whose owner vanished become ``lost`` (or ``timeout``), never re-run."""
        return self._drive(self._mark_lost(owner, started_before, state))

    @blocking
    def recover(self, alive: Callable[[str], bool | None] = holder_alive) -> Recovery:
        """For every owner ``alive`` says is gone: requeue its unstarted claims and mark its
        running jobs lost. Owners it cannot judge (None) are left alone.
        """
        return self._drive(self._recover(alive))

    @blocking
    def candidates(self, limit: int = 100) -> list[str]:
        """Queued, ownerless jobs, oldest first: a hint, the claim decides."""
        return self._drive(self._candidates(limit))

    @blocking
    def get(self, job_id: str) -> Job | None:
        return self._drive(self._get(job_id))

    @blocking
    def close(self) -> None:
        self.db.close()


class AsyncJobStore(_JobCore, AsyncClosing):
    """``JobStore`` for an event loop: the same core, every call awaited.

    The table is created at the first call (or ``await store.setup()``), since a
    constructor cannot await. Methods mirror ``JobStore``'s one for one (see there).
    """

    def __init__(self, db: AsyncDatabase, *, table: str = "corevo_jobs",
                 owner: str | None = None, observer: Observer | None = None,
                 worker: str | None = None, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(table=table, owner=owner, observer=observer, worker=worker,
                         registry=registry, clock=clock)
        self.db = db
        self._ready: asyncio.Future[None] | None = None

    async def setup(self) -> None:
        """Create the table once (idempotent; concurrent first calls share one setup)."""
        if self._ready is None:
            self._ready = asyncio.get_running_loop().create_future()
            try:
                await self._drive(self._schema(), setup=False)
            except BaseException as exc:
                ready, self._ready = self._ready, None
                ready.set_exception(exc)
                ready.exception()   # retrieved: a later caller retries instead
                raise
            self._ready.set_result(None)
        await asyncio.shield(self._ready)

    async def _drive(self, step: Step[T], *, setup: bool = True) -> T:
        """Run one core operation to its outcome, awaiting its I/O."""
        if setup and (self._ready is None or not self._ready.done()):
            await self.setup()
        try:
            effect = next(step)
            while True:
                try:
                    if isinstance(effect, OffLoop):
                        result = await asyncio.to_thread(effect.fn)
                    else:
                        result = await self.db.run(effect.text, effect.params)
                except BaseException as exc:
                    self._failed(exc)
                    effect = step.throw(exc)
                else:
                    effect = step.send(result)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    async def create_job(self, job_id: str | None = None, payload: str | None = None) -> str:
        return await self._drive(self._create_job(job_id, payload))

    async def create_local(self, job_id: str | None = None, payload: str | None = None,
                           *, owner: str | None = None) -> Claim:
        return await self._drive(self._create_local(job_id, payload, owner))

    async def claim(self, job_id: str, *, owner: str | None = None) -> ClaimOutcome:
        return await self._drive(self._claim(job_id, owner))

    async def start(self, claim: Claim, execution_id: str | None = None) -> StartOutcome:
        return await self._drive(self._start(claim, execution_id))

    async def finish(self, claim: Claim, execution_id: str, state: TerminalState) -> bool:
        return await self._drive(self._finish(claim, execution_id, state))

    async def cancel_queued(self, job_id: str) -> bool:
        return await self._drive(self._cancel_queued(job_id))

    async def reclaim_prestart(self, *, owner: str | None = None,
                               claimed_before: float | None = None) -> int:
        return await self._drive(self._reclaim_prestart(owner, claimed_before))

    async def give_back_undecided(self) -> int:
        return await self._drive(self._give_back_undecided())

    async def mark_lost(self, *, owner: str | None = None,
                        started_before: float | None = None,
                        state: TerminalState = "lost") -> int:
        return await self._drive(self._mark_lost(owner, started_before, state))

    async def recover(self, alive: Callable[[str], bool | None] = holder_alive) -> Recovery:
        return await self._drive(self._recover(alive))

    async def candidates(self, limit: int = 100) -> list[str]:
        return await self._drive(self._candidates(limit))

    async def get(self, job_id: str) -> Job | None:
        return await self._drive(self._get(job_id))

    async def aclose(self) -> None:
        await self.db.aclose()


class JobsOnLoop:
    """The job-store calls a loop-side component makes, for either store: awaited on an
    ``AsyncJobStore``, in a thread on a sync ``JobStore`` (never on the loop's thread).
    The cancel plane takes either through this."""

    def __init__(self, jobs: JobStore | AsyncJobStore) -> None:
        self.jobs = jobs

    async def get(self, job_id: str) -> Job | None:
        if isinstance(self.jobs, AsyncJobStore):
            return await self.jobs.get(job_id)
        return await asyncio.to_thread(self.jobs.get, job_id)

    async def cancel_queued(self, job_id: str) -> bool:
        if isinstance(self.jobs, AsyncJobStore):
            return await self.jobs.cancel_queued(job_id)
        return await asyncio.to_thread(self.jobs.cancel_queued, job_id)

    async def finish(self, claim: Claim, execution_id: str, state: TerminalState) -> bool:
        if isinstance(self.jobs, AsyncJobStore):
            return await self.jobs.finish(claim, execution_id, state)
        return await asyncio.to_thread(self.jobs.finish, claim, execution_id, state)
