"""The job table behind the claim protocol (docs/leases-claims.md), on any SQL backend.

``JobStore`` runs the statements of ``sql.py`` through a small ``Database`` (SQLite or
PostgreSQL), turns row counts into typed outcomes and reports each one through the
observer. Every call is one short autocommit statement: no transaction is ever held
across remote work, which is the point of conditional updates.

Database errors are raised to the caller (a claim that cannot be decided must not be
guessed); only the reporting is guarded, by ``MetricsObserver`` itself. A server out of
reach is a ``BackendUnavailable``, counted in ``corevo_instrumentation_errors_total
{component="claims-db"}``. When the connection died after the statement was sent, the
reply is lost but the write may have been applied: claim, start and finish then read the
row back, and only their own token / execution id in it makes them report success. A
retry can never win twice: the claim's WHERE admits only an ownerless row.

Example::

    jobs = SqliteJobStore("/var/lib/app/jobs.db")
    job_id = jobs.create_job(payload='{"prompt": "hi"}')
    won = jobs.claim(job_id)                        # on an idle worker
    if won.claim and jobs.start(won.claim, "exec-1").started:
        ...                                         # side effects only after this
        jobs.finish(won.claim, "exec-1", "completed")
"""

from __future__ import annotations

import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from ..core.errors import BackendUnavailable, ConfigError
from ..core.guard import absorb
from ..core.lifecycle import Closing
from ..core.telemetry import HasTelemetry, Telemetry
from ..leases.holder import HolderIds, holder_alive
from ..observer import MetricsObserver, Observer, TerminalState
from . import sql
from .model import Claim, ClaimOutcome, Job, Recovery, StartOutcome

Rows = list[tuple[Any, ...]]


class Database(Closing, ABC):
    """One connection in autocommit mode; ``run`` executes one statement."""

    @abstractmethod
    def run(self, statement: str, params: Mapping[str, Any]) -> tuple[Rows, int]:
        """Rows (for RETURNING/SELECT) and the affected row count."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection."""


class JobStore(HasTelemetry, Closing):
    """Create, claim, start, finish and recover jobs; one observer call per outcome."""

    def __init__(
        self,
        db: Database,
        *,
        table: str = "corevo_jobs",
        worker: str | None = None,
        owner: str | None = None,
        observer: Observer | None = None,
        registry: CollectorRegistry | None = None,
        telemetry: Telemetry | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.db = db
        self.table = sql.check_table(table)
        if telemetry is None and registry is None and isinstance(observer, MetricsObserver):
            registry = observer.registry  # failures are counted where the observer writes
        self.telemetry = Telemetry.resolve(worker, registry, telemetry)
        #: this process's owner id; names the pid so a recovery pass can tell it is gone
        self.owner = owner or HolderIds(self.worker).new()
        self.observer = observer or MetricsObserver(telemetry=self.telemetry)
        self.clock = clock
        #: job -> token of a claim sent whose outcome never came back (see give_back_undecided)
        self.undecided: dict[str, str] = {}
        for statement in (sql.SCHEMA, sql.INDEX):
            self._run(statement)

    def _run(self, template: str, **params: Any) -> tuple[Rows, int]:
        try:
            return self.db.run(template.format(t=self.table), params)
        except BackendUnavailable as exc:
            absorb("claims-db", exc, telemetry=self.telemetry)
            raise

    def _applied(self, exc: BackendUnavailable, job_id: str,
                 ours: Callable[[Job], bool]) -> Job | None:
        """After a lost reply: the row, if it carries this attempt's own identity.

        Only when the connection died on its own (``bound`` None): a server that let a
        deadline pass would not answer the read either, and waiting again would double
        the caller's bound.
        """
        if not exc.maybe_committed or exc.bound is not None:
            return None
        try:
            job = self.get(job_id)
        except BackendUnavailable:
            return None
        return job if job is not None and ours(job) else None

    # --- creating ---------------------------------------------------------------------
    def create_job(self, job_id: str | None = None, payload: str | None = None) -> str:
        """Persist a queued, ownerless job (the input an idle worker will need)."""
        job_id = job_id or uuid.uuid4().hex
        self._run(sql.INSERT, job=job_id, now=self.clock(), payload=payload)
        self.observer.dispatch_path("queued")
        return job_id

    def create_local(self, job_id: str | None = None, payload: str | None = None,
                     *, owner: str | None = None) -> Claim:
        """The local fast path: the accepting worker has room, so it owns the job at once.

        The job still gets a row and a claim, so cancel, recovery and the started CAS
        work the same; it just never waits in the queue.
        """
        job_id = job_id or uuid.uuid4().hex
        owner = owner or self.owner
        token = uuid.uuid4().hex
        now = self.clock()
        self._run(sql.INSERT_CLAIMED, job=job_id, now=now, payload=payload, owner=owner,
                  token=token)
        self.observer.dispatch_path("local")
        self.observer.claim("won", queue_wait=0.0)
        return Claim(job_id, owner, 1, token, now)

    # --- the protocol ---------------------------------------------------------------
    def claim(self, job_id: str, *, owner: str | None = None) -> ClaimOutcome:
        """One conditional update; exactly one concurrent caller gets ``won``."""
        owner = owner or self.owner
        token = uuid.uuid4().hex
        now = self.clock()
        try:
            rows, _ = self._run(sql.CLAIM, job=job_id, owner=owner, now=now, token=token)
        except BackendUnavailable as exc:
            job = self._applied(exc, job_id, lambda j: j.token == token and j.owner == owner)
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

    def start(self, claim: Claim, execution_id: str | None = None) -> StartOutcome:
        """The started CAS: binds an execution only if owner, epoch and token still match.

        ``fenced`` (0 rows) means this claim was reclaimed while its owner was away: the
        caller must not run anything.
        """
        execution_id = execution_id or uuid.uuid4().hex
        now = self.clock()
        try:
            _, n = self._run(sql.START, job=claim.job_id, owner=claim.owner,
                             epoch=claim.epoch, token=claim.token, execution=execution_id,
                             now=now)
        except BackendUnavailable as exc:
            if self._applied(exc, claim.job_id, lambda j: j.token == claim.token
                             and j.execution_id == execution_id) is None:
                raise
            n = 1
        if n != 1:
            self.observer.started("fenced")
            return StartOutcome(claim.job_id, None)
        self.observer.started("started", claim_to_start=now - claim.claimed_at)
        return StartOutcome(claim.job_id, execution_id)

    def finish(self, claim: Claim, execution_id: str, state: TerminalState) -> bool:
        """Executor's terminal write, fenced by its own execution identity."""
        try:
            _, n = self._run(sql.FINISH, job=claim.job_id, owner=claim.owner,
                             epoch=claim.epoch, token=claim.token, execution=execution_id,
                             state=state, now=self.clock())
        except BackendUnavailable as exc:
            if self._applied(exc, claim.job_id, lambda j: j.execution_id == execution_id
                             and j.token == claim.token and j.state == state) is None:
                raise
            n = 1
        self.observer.terminal(state, n)
        return n == 1

    def cancel_queued(self, job_id: str) -> bool:
        """Cancel a job that never started (claimed or not); a running one is not touched."""
        _, n = self._run(sql.CANCEL_QUEUED, job=job_id, now=self.clock())
        self.observer.terminal("cancelled", n)
        return n == 1

    # --- recovery ---------------------------------------------------------------------
    def reclaim_prestart(self, *, owner: str | None = None,
                         claimed_before: float | None = None) -> int:
        """Requeue claims not yet started, of ``owner`` and/or older than ``claimed_before``."""
        template = sql.RECLAIM
        params: dict[str, Any] = {}  # SQL parameters of mixed types, as Database.run takes
        if owner is not None:
            template, params["owner"] = template + sql.BY_OWNER, owner
        if claimed_before is not None:
            template, params["before"] = template + sql.CLAIMED_BEFORE, claimed_before
        if not params:
            raise ConfigError("reclaim_prestart needs owner= or claimed_before=")
        _, n = self._run(template, **params)
        self.observer.reclaimed(n)
        return n

    def give_back_undecided(self) -> int:
        """Requeue the claims this store sent but never learned the outcome of.

        Such a claim may have committed after its reply was lost (or after the client gave
        up on a frozen server): the row then names this owner with a token nobody holds.
        Call this once the server answers again; a claim that never committed matches
        nothing. One still unreachable stays listed for the next call.
        ``reclaim_prestart(claimed_before=...)`` remains the backstop for a late commit.
        """
        n = 0
        for job_id, token in list(self.undecided.items()):
            _, given = self._run(sql.GIVE_BACK, job=job_id, token=token)
            self.undecided.pop(job_id, None)
            n += given
        if n:
            self.observer.reclaimed(n)
        return n

    def mark_lost(self, *, owner: str | None = None, started_before: float | None = None,
                  state: TerminalState = "lost") -> int:
        """Running jobs whose owner vanished become ``lost`` (or ``timeout``), never re-run."""
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
        _, n = self._run(template, **params)
        self.observer.terminal(state, n)
        return n

    def recover(self, alive: Callable[[str], bool | None] = holder_alive) -> Recovery:
        """For every owner ``alive`` says is gone: requeue its unstarted claims and mark its
        running jobs lost. Owners it cannot judge (None) are left alone.
        """
        rows, _ = self._run(sql.OWNERS)
        reclaimed = lost = 0
        for (owner,) in rows:
            if alive(owner) is False:
                reclaimed += self.reclaim_prestart(owner=owner)
                lost += self.mark_lost(owner=owner)
        return Recovery(reclaimed, lost)

    # --- reading ----------------------------------------------------------------------
    def candidates(self, limit: int = 100) -> list[str]:
        """Queued, ownerless jobs, oldest first: a hint, the claim decides."""
        rows, _ = self._run(sql.CANDIDATES, n=limit)
        return [r[0] for r in rows]

    def get(self, job_id: str) -> Job | None:
        rows, _ = self._run(sql.GET, job=job_id)
        return Job(*rows[0]) if rows else None

    def close(self) -> None:
        self.db.close()
