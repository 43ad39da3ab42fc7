"""SQLite connections the embedded backends share: leases, claims, events, cancel.

One place sets what several processes writing one file need (WAL, a busy timeout that
queues writers instead of failing them) and what an audit of a production file needs
(read-only, nothing created).
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Final

__all__ = ["BUSY_TIMEOUT_MS", "open_sqlite", "open_sqlite_readonly"]

BUSY_TIMEOUT_MS: Final = 5000


def open_sqlite(path: str | Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> sqlite3.Connection:
    """An autocommit connection that several processes can share a file with: WAL, and a
    busy timeout so writers queue on the lock instead of failing. Threads may share it
    under the caller's lock.
    """
    db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False,
                         timeout=busy_timeout_ms / 1000)
    db.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
    try:
        _wal(db, busy_timeout_ms / 1000)
        db.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        db.close()
        raise
    return db


def _wal(db: sqlite3.Connection, budget: float) -> None:
    """Switch to WAL, retried within the busy timeout: on a new file, processes that open
    it at once (the workers of one server starting) race for the switch, and SQLite
    answers "database is locked" at once, without its busy handler."""
    deadline = time.monotonic() + budget
    pause = 0.005
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            if time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


def open_sqlite_readonly(path: str | Path, busy_timeout_ms: int = BUSY_TIMEOUT_MS
                         ) -> sqlite3.Connection:
    """A read-only connection (``mode=ro`` URI): never creates the file or a table, never
    switches the journal mode. For audits of a production store.
    """
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False,
                         timeout=busy_timeout_ms / 1000)
    db.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
    return db
