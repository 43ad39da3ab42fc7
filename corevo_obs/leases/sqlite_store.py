"""Leases in one SQLite table: the embedded default, same semantics as the Redis ZSET.

A row per (quota, holder) with its last heartbeat. Acquire runs reap, count and insert
inside one ``BEGIN IMMEDIATE`` transaction, which takes the database write lock up front:
two processes cannot both see "one slot left". Every call is one short local transaction
(tens of µs in WAL mode), so the blocking store is fine for scripts and tests;
``AsyncSqliteLeaseStore`` runs the same transactions in a thread for code on a loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, TypeVar

from .base import AcquireResult, AsyncLeaseStore, LeaseStore

T = TypeVar("T")
BUSY_TIMEOUT_MS: Final = 5000

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS corevo_leases (
    quota TEXT NOT NULL,
    holder TEXT NOT NULL,
    heartbeat REAL NOT NULL,
    PRIMARY KEY (quota, holder)
) WITHOUT ROWID
"""


def open_sqlite(path: str | Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    """An autocommit connection that several processes can share a file with: WAL, and a
    busy timeout so writers queue on the lock instead of failing. Threads may share it
    under the caller's lock.
    """
    db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False,
                         timeout=busy_timeout_ms / 1000)
    db.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    return db


class _SqliteLeases:
    """The four primitives on one connection, serialised by a lock (threads may share it)."""

    def __init__(self, path: str | Path, quota: str, busy_timeout: float) -> None:
        self.path = str(path)
        self.quota = quota
        self._busy_ms = int(busy_timeout * 1000)
        self._lock = threading.Lock()
        self._db = open_sqlite(self.path, self._busy_ms)
        self._db.execute(SCHEMA)

    def _tx(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``body`` in one write transaction. Whatever fails — the body, or COMMIT
        itself (a lock, a full disk, a deferred constraint leave the transaction open) —
        is rolled back before the error propagates: the shared connection is never left
        inside a transaction, where every later BEGIN would fail.
        """
        with self._lock:
            db = self._db
            db.execute("BEGIN IMMEDIATE")  # a lock timeout here opens nothing
            try:
                out = body(db)
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
            self._db = open_sqlite(self.path, self._busy_ms)

    def try_acquire(self, holder: str, now: float, limit: int, timeout: float) -> AcquireResult:
        def body(db: sqlite3.Connection) -> AcquireResult:
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
            return AcquireResult(True, reaped, held + (0 if present else 1))

        return self._tx(body)

    def _one(self, sql: str, args: tuple[Any, ...]) -> int:
        with self._lock:
            return self._db.execute(sql, args).rowcount

    def renew(self, holder: str, now: float) -> bool:
        return self._one("UPDATE corevo_leases SET heartbeat = ? WHERE quota = ? AND holder = ?",
                         (now, self.quota, holder)) > 0

    def remove(self, holder: str) -> bool:
        return self._one("DELETE FROM corevo_leases WHERE quota = ? AND holder = ?",
                         (self.quota, holder)) > 0

    def holders(self) -> list[tuple[str, float]]:
        with self._lock:
            rows = self._db.execute("SELECT holder, heartbeat FROM corevo_leases WHERE quota = ?"
                                    " ORDER BY heartbeat", (self.quota,)).fetchall()
        return [(h, float(t)) for h, t in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()


class SqliteLeaseStore(LeaseStore):
    """Blocking store on a SQLite file shared by the processes of one host.

    ``busy_timeout`` (seconds) bounds how long a call queues for another process's write
    lock before it fails (and is counted as an ``error``, fail-closed by default).

    Example::

        store = SqliteLeaseStore("llm", "/var/lib/app/leases.db", limit=10, timeout=30)
    """

    def __init__(self, quota: str, path: str | Path, *, limit: int,
                 busy_timeout: float = BUSY_TIMEOUT_MS / 1000, **options: Any) -> None:
        super().__init__(quota, limit=limit, **options)
        self._rows = _SqliteLeases(path, quota, busy_timeout)

    def _try_acquire(self, holder: str, now: float) -> AcquireResult:
        return self._rows.try_acquire(holder, now, self.limit, self.timeout)

    def _renew(self, holder: str, now: float) -> bool:
        return self._rows.renew(holder, now)

    def _remove(self, holder: str) -> bool:
        return self._rows.remove(holder)

    def holders(self) -> list[tuple[str, float]]:
        return self._rows.holders()

    def close(self) -> None:
        self._rows.close()


class AsyncSqliteLeaseStore(AsyncLeaseStore):
    """The SQLite store for asyncio: each transaction runs in the default thread pool,
    so a lock wait on a busy database never freezes the loop.
    """

    def __init__(self, quota: str, path: str | Path, *, limit: int,
                 busy_timeout: float = BUSY_TIMEOUT_MS / 1000, **options: Any) -> None:
        super().__init__(quota, limit=limit, **options)
        self._rows = _SqliteLeases(path, quota, busy_timeout)

    async def _try_acquire(self, holder: str, now: float) -> AcquireResult:
        return await asyncio.to_thread(self._rows.try_acquire, holder, now, self.limit,
                                       self.timeout)

    async def _renew(self, holder: str, now: float) -> bool:
        return await asyncio.to_thread(self._rows.renew, holder, now)

    async def _remove(self, holder: str) -> bool:
        return await asyncio.to_thread(self._rows.remove, holder)

    async def holders(self) -> list[tuple[str, float]]:
        return await asyncio.to_thread(self._rows.holders)

    async def close(self) -> None:
        await asyncio.to_thread(self._rows.close)
