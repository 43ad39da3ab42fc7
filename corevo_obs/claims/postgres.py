"""PostgreSQL backend for the job store (psycopg 3, imported only when used).

Autocommit, READ COMMITTED: a second concurrent claim blocks on the row lock, then
re-checks ``owner IS NULL`` against the committed row and updates nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from . import sql
from .store import Database, JobStore, Rows


class PostgresDatabase(Database):
    def __init__(self, conninfo: Any) -> None:
        if isinstance(conninfo, str):
            import psycopg

            conninfo = psycopg.connect(conninfo, autocommit=True)
        elif not getattr(conninfo, "autocommit", False):
            # Each statement must commit on its own: an open transaction would keep the
            # claimed row locked across the caller's remote work.
            raise ConfigError("the psycopg connection must be in autocommit mode",
                              source="PostgresJobStore")
        self._conn = conninfo
        self._lock = threading.Lock()
        self._sql: dict[str, str] = {}

    def run(self, statement: str, params: Mapping[str, Any]) -> tuple[Rows, int]:
        converted = self._sql.get(statement)
        if converted is None:
            converted = self._sql[statement] = sql.to_pyformat(statement)
        with self._lock:
            cur = self._conn.execute(converted, params)
            rows = cur.fetchall() if cur.description is not None else []
            return rows, cur.rowcount

    def close(self) -> None:
        self._conn.close()


def PostgresJobStore(dsn: str, **options: Any) -> JobStore:  # noqa: N802 - a constructor
    """A ``JobStore`` on PostgreSQL (a DSN or an open autocommit psycopg connection)."""
    return JobStore(PostgresDatabase(dsn), **options)
