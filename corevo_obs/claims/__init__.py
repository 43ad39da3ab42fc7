"""Job claims fenced by owner, epoch and token, with execution_started as the recovery
boundary (SQLite embedded, PostgreSQL for real). psycopg is imported only when used.
"""

from __future__ import annotations

from .model import Claim, ClaimOutcome, Job, Recovery, StartOutcome
from .postgres import PostgresDatabase, PostgresJobStore
from .sqlite import SqliteDatabase, SqliteJobStore
from .store import Database, JobStore

__all__ = [
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
