"""SQLite backend for the job store: the embedded default (one file per host).

WAL mode and a busy timeout let several processes race on one file: writers queue on
the database lock instead of failing, and each conditional update is atomic.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Final

from prometheus_client import CollectorRegistry

from ..core.sqlite import open_sqlite
from ..observer import Observer
from .store import AsyncDatabase, AsyncJobStore, Database, JobStore, Rows

BUSY_TIMEOUT_MS: Final = 10_000


class SqliteDatabase(Database):
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._conn = open_sqlite(self.path, BUSY_TIMEOUT_MS)

    def run(self, statement: str, params: Mapping[str, Any]) -> tuple[Rows, int]:
        with self._lock:
            cur = self._conn.execute(statement, params)
            rows = cur.fetchall()
            return rows, cur.rowcount

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class AsyncSqliteDatabase(AsyncDatabase):
    """``SqliteDatabase`` on one worker thread of its own.

    sqlite3 has no async driver: every statement (and the busy-timeout wait behind
    another process's write lock, up to 10 s) is a blocking call. One thread per store
    keeps it off the loop and runs the statements in order on one connection — the
    serialisation ``SqliteDatabase`` gets from its lock, without tying up the loop's
    default pool while a writer waits. The file is opened on that thread too.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="corevo-jobs-sqlite")
        self._db: SqliteDatabase | None = None
        self._closed = False

    def _run(self, statement: str, params: Mapping[str, Any]) -> tuple[Rows, int]:
        if self._db is None:
            self._db = SqliteDatabase(self.path)
        return self._db.run(statement, params)

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()

    async def run(self, statement: str, params: Mapping[str, Any]) -> tuple[Rows, int]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._run, statement, params)

    async def aclose(self) -> None:
        """Close the file on its thread, then end the thread; the second call does nothing."""
        if self._closed:
            return
        self._closed = True
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._close)
        self._executor.shutdown(wait=False)


class SqliteJobStore(JobStore):
    """A ``JobStore`` on a SQLite file (options: those of ``JobStore``)."""

    def __init__(self, path: str | Path, *, table: str = "corevo_jobs",
                 owner: str | None = None, observer: Observer | None = None,
                 worker: str | None = None, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(SqliteDatabase(path), table=table, owner=owner, observer=observer,
                         worker=worker, registry=registry, clock=clock)


class AsyncSqliteJobStore(AsyncJobStore):
    """``SqliteJobStore`` for an event loop: the same core, statements on the store's own
    thread (see ``AsyncSqliteDatabase``). Options: those of ``JobStore``.
    """

    def __init__(self, path: str | Path, *, table: str = "corevo_jobs",
                 owner: str | None = None, observer: Observer | None = None,
                 worker: str | None = None, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(AsyncSqliteDatabase(path), table=table, owner=owner,
                         observer=observer, worker=worker, registry=registry, clock=clock)
