"""Job claims fenced by owner, epoch and token, with execution_started as the recovery
boundary (SQLite embedded, PostgreSQL for real), sync (threads, scripts) and async (an
event loop: ``AsyncSqliteJobStore``, ``AsyncPostgresJobStore``) over one core.
psycopg is imported with the PostgreSQL names, on their first use (PEP 562): import
them where your module starts, not in a coroutine, and the import never runs on a loop.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .model import Claim, ClaimOutcome, Job, Recovery, StartOutcome
from .sqlite import AsyncSqliteJobStore, SqliteDatabase, SqliteJobStore
from .store import AsyncJobStore, Database, JobStore

if TYPE_CHECKING:
    from .postgres import AsyncPostgresJobStore, PostgresDatabase, PostgresJobStore

__all__ = [
    "AsyncJobStore",
    "AsyncPostgresJobStore",
    "AsyncSqliteJobStore",
    "Claim",
    "ClaimOutcome",
    "Database",
    "Job",
    "JobStore",
    "PostgresDatabase",
    "PostgresJobStore",
    "Recovery",
    "SqliteDatabase",
    "SqliteJobStore",
    "StartOutcome",
]


_LAZY = frozenset({"AsyncPostgresJobStore", "PostgresDatabase", "PostgresJobStore"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import postgres

        value = globals()[name] = getattr(postgres, name)  # resolved once
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
