"""SQLite connections the embedded backends share: leases, claims, events, cancel.

One place sets what several processes writing one file need (WAL, a busy timeout that
queues writers instead of failing them) and what an audit of a production file needs
(read-only, nothing created).
"""

from __future__ import annotations

import sqlite3
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
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    return db


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
