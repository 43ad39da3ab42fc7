"""SQLite backend for the job store: the embedded default (one file per host).

WAL mode and a busy timeout let several processes race on one file: writers queue on
the database lock instead of failing, and each conditional update is atomic.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from ..core.sqlite import open_sqlite
from .store import Database, JobStore, Rows

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


class SqliteJobStore(JobStore):
    """A ``JobStore`` on a SQLite file (options: those of ``JobStore``)."""

    def __init__(self, path: str | Path, **options: Any) -> None:
        super().__init__(SqliteDatabase(path), **options)
