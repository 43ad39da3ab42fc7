"""Leases in one SQLite table: the embedded default, same semantics as the Redis ZSET.

A row per (quota, holder) with its last heartbeat. Acquire runs reap, count and insert
inside one ``BEGIN IMMEDIATE`` transaction, which takes the database write lock up front:
two processes cannot both see "one slot left". The time is read *inside* that
transaction, from SQLite's own clock (``julianday('now')``), after the lock is held: a
call that queued behind another writer's lock writes the time it really ran, never a
time from before the wait, and no client clock is consulted. Renewals do the same.

Every call is one short local transaction (tens of µs in WAL mode), so the blocking
store is fine for scripts and tests; ``AsyncSqliteLeaseStore`` runs the same
transactions in a thread for code on a loop. Fencing tokens come from a counter row
(``corevo_lease_tokens``) bumped in the acquire's transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final, TypeVar

from prometheus_client import CollectorRegistry

from ..core.marker import blocking
from ..core.sqlite import BUSY_TIMEOUT_MS, open_sqlite, open_sqlite_readonly
from ..observer import Observer
from .base import (
    DEFAULT_TIMEOUT,
    AcquireResult,
    AsyncLeaseStore,
    Counted,
    LeaseStore,
    _number,
)
from .breaker import CircuitBreaker

T = TypeVar("T")

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS corevo_leases (
    quota TEXT NOT NULL,
    holder TEXT NOT NULL,
    heartbeat REAL NOT NULL,
    PRIMARY KEY (quota, holder)
) WITHOUT ROWID
"""
TOKENS: Final = """
CREATE TABLE IF NOT EXISTS corevo_lease_tokens (
    quota TEXT PRIMARY KEY,
    token INTEGER NOT NULL
) WITHOUT ROWID
"""
#: SQLite's clock in unix seconds (ms resolution), evaluated when the statement runs
NOW_SQL: Final = "SELECT (julianday('now') - 2440587.5) * 86400.0"


class _SqliteLeases:
    """The primitives on one connection, serialised by a lock (threads may share it)."""

    def __init__(self, path: str | Path, quota: str, busy_timeout: float,
                 readonly: bool = False) -> None:
        self.path = str(path)
        self.quota = quota
        self.busy = busy_timeout
        self._busy_ms = int(busy_timeout * 1000)
        self._readonly = readonly
        self._lock = threading.Lock()
        self._db = self._connect()
        if not readonly:
            self._db.execute(SCHEMA)
            self._db.execute(TOKENS)

    def _connect(self) -> sqlite3.Connection:
        if self._readonly:
            return open_sqlite_readonly(self.path, self._busy_ms)
        return open_sqlite(self.path, self._busy_ms)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[sqlite3.Connection]:
        """The connection, for one call. Threads of this process queue here for at most
        the busy timeout too, so one call's wait stays within the bound the store's
        timeout is checked against.
        """
        if not self._lock.acquire(timeout=self.busy):
            raise sqlite3.OperationalError("lease connection busy in this process")
        try:
            yield self._db
        finally:
            self._lock.release()

    def _tx(self, body: Callable[[sqlite3.Connection, float], T]) -> T:
        """Run ``body(db, now)`` in one write transaction; ``now`` is read once the write
        lock is held. Whatever fails — the body, or COMMIT itself (a lock, a full disk, a
        deferred constraint leave the transaction open) — is rolled back before the error
        propagates: the shared connection is never left inside a transaction, where every
        later BEGIN would fail.
        """
        with self._locked() as db:
            db.execute("BEGIN IMMEDIATE")  # a lock timeout here opens nothing
            try:
                out = body(db, float(db.execute(NOW_SQL).fetchone()[0]))
                db.execute("COMMIT")
            except BaseException:
                self._abort(db)
                raise
            return out

    def _abort(self, db: sqlite3.Connection) -> None:
        """Roll back; if even that fails, replace the connection (callers hold the lock)."""
        with contextlib.suppress(sqlite3.Error):
            if db.in_transaction:
                db.execute("ROLLBACK")
        if db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                db.close()
            self._db = self._connect()

    def try_acquire(self, holder: str, limit: int, timeout: float) -> AcquireResult:
        def body(db: sqlite3.Connection, now: float) -> AcquireResult:
            reaped = db.execute("DELETE FROM corevo_leases WHERE quota = ? AND heartbeat < ?",
                                (self.quota, now - timeout)).rowcount
            held, present = db.execute(
                "SELECT COUNT(*), COALESCE(SUM(holder = ?), 0) FROM corevo_leases"
                " WHERE quota = ?", (holder, self.quota)).fetchone()
            if held >= limit and not present:
                return AcquireResult(False, reaped, held)
            db.execute("INSERT INTO corevo_leases (quota, holder, heartbeat) VALUES (?, ?, ?)"
                       " ON CONFLICT (quota, holder) DO UPDATE SET heartbeat = excluded.heartbeat",
                       (self.quota, holder, now))
            # The token: the grant's time in µs, or one more than the last (never back).
            token = db.execute(
                "INSERT INTO corevo_lease_tokens (quota, token) VALUES (?, ?)"
                " ON CONFLICT (quota) DO UPDATE SET token = MAX(token + 1, excluded.token)"
                " RETURNING token", (self.quota, int(now * 1_000_000))).fetchone()[0]
            return AcquireResult(True, reaped, held + (0 if present else 1), int(token))

        return self._tx(body)

    def _live(self, db: sqlite3.Connection, now: float, timeout: float) -> int:
        """Holders an acquire would count now (heartbeat within the timeout)."""
        return int(db.execute("SELECT COUNT(*) FROM corevo_leases WHERE quota = ?"
                              " AND heartbeat >= ?", (self.quota, now - timeout)).fetchone()[0])

    def renew(self, holder: str, timeout: float) -> Counted:
        def body(db: sqlite3.Connection, now: float) -> Counted:
            if db.execute("UPDATE corevo_leases SET heartbeat = ? WHERE quota = ?"
                          " AND holder = ? AND heartbeat >= ?",
                          (now, self.quota, holder, now - timeout)).rowcount:
                return Counted(True, self._live(db, now, timeout))
            db.execute("DELETE FROM corevo_leases WHERE quota = ? AND holder = ?",
                       (self.quota, holder))  # expired: gone, even before a reap
            return Counted(False, self._live(db, now, timeout))

        return self._tx(body)

    def remove(self, holder: str, timeout: float) -> Counted:
        def body(db: sqlite3.Connection, now: float) -> Counted:
            removed = db.execute("DELETE FROM corevo_leases WHERE quota = ? AND holder = ?",
                                 (self.quota, holder)).rowcount > 0
            return Counted(removed, self._live(db, now, timeout))

        return self._tx(body)

    def holders(self) -> list[tuple[str, float]]:
        with self._locked() as db:
            rows = db.execute("SELECT holder, heartbeat FROM corevo_leases WHERE quota = ?"
                              " ORDER BY heartbeat", (self.quota,)).fetchall()
        return [(h, float(t)) for h, t in rows]

    def now(self) -> float:
        with self._locked() as db:
            return float(db.execute(NOW_SQL).fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


class _SqliteOptions:
    """Option handling shared by both SQLite stores."""

    _rows: _SqliteLeases

    def __init__(self, quota: str, path: str | Path, *, limit: int,
                 busy_timeout: float = BUSY_TIMEOUT_MS / 1000, readonly: bool = False,
                 timeout: float = DEFAULT_TIMEOUT, heartbeat_interval: float | None = None,
                 margin: float | None = None, fail_open: bool = False,
                 breaker: CircuitBreaker | bool = False, observer: Observer | None = None,
                 worker: str | None = None, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._rows = _SqliteLeases(path, quota, _number(busy_timeout, "busy_timeout"),
                                   readonly)
        try:
            super().__init__(quota, limit=limit, timeout=timeout,  # type: ignore[call-arg]
                             heartbeat_interval=heartbeat_interval, margin=margin,
                             fail_open=fail_open, breaker=breaker, observer=observer,
                             worker=worker, registry=registry, clock=clock)
        except BaseException:
            self._rows.close()
            raise

    def store_wait(self) -> tuple[float, str]:
        return self._rows.busy, "SQLite busy timeout"


class SqliteLeaseStore(_SqliteOptions, LeaseStore):
    """Blocking store on a SQLite file shared by the processes of one host.

    ``busy_timeout`` (seconds, default 5) bounds how long a call queues for another
    process's write lock before it fails (counted as an ``error``, fail-closed by
    default); the lease timeout must exceed it plus a heartbeat interval and the margin.
    ``readonly=True`` opens the file with a ``mode=ro`` URI (audits): nothing is created.
    No circuit breaker by default (a local file, not a network backend that can hang);
    ``breaker=True`` builds the default one, or pass your own. The other options are
    those of every lease store (docs/leases-claims.md).

    Example::

        store = SqliteLeaseStore("llm", "/var/lib/app/leases.db", limit=10, timeout=30)
    """

    def _try_acquire(self, holder: str) -> AcquireResult:
        return self._rows.try_acquire(holder, self.limit, self.timeout)

    def _renew(self, holder: str) -> Counted:
        return self._rows.renew(holder, self.timeout)

    def _remove(self, holder: str) -> Counted:
        return self._rows.remove(holder, self.timeout)

    @blocking
    def holders(self) -> list[tuple[str, float]]:
        return self._rows.holders()

    @blocking
    def server_time(self) -> float:
        return self._rows.now()

    @blocking
    def close(self) -> None:
        self._rows.close()


class AsyncSqliteLeaseStore(_SqliteOptions, AsyncLeaseStore):
    """The SQLite store for asyncio: each transaction runs in the default thread pool,
    so a lock wait on a busy database never freezes the loop.
    """

    async def _try_acquire(self, holder: str) -> AcquireResult:
        return await asyncio.to_thread(self._rows.try_acquire, holder, self.limit,
                                       self.timeout)

    async def _renew(self, holder: str) -> Counted:
        return await asyncio.to_thread(self._rows.renew, holder, self.timeout)

    async def _remove(self, holder: str) -> Counted:
        return await asyncio.to_thread(self._rows.remove, holder, self.timeout)

    async def holders(self) -> list[tuple[str, float]]:
        return await asyncio.to_thread(self._rows.holders)

    async def server_time(self) -> float:
        return await asyncio.to_thread(self._rows.now)

    async def aclose(self) -> None:
        await asyncio.to_thread(self._rows.close)
