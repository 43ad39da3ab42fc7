"""Job claims fenced by owner, epoch and token, with execution_started as the recovery
boundary (SQLite embedded, PostgreSQL for real), sync (threads, scripts) and async (an
event loop: ``AsyncSqliteJobStore``, ``AsyncPostgresJobStore``) over one core.
psycopg is imported only when used.
"""

from __future__ import annotations

from .model import Claim, ClaimOutcome, Job, Recovery, StartOutcome
from .postgres import AsyncPostgresJobStore, PostgresDatabase, PostgresJobStore
from .sqlite import AsyncSqliteJobStore, SqliteDatabase, SqliteJobStore
from .store import AsyncJobStore, Database, JobStore

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
