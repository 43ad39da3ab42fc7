"""Named, heartbeated leases on a global concurrency quota (Redis ZSET or SQLite).

Backends are imported lazily: ``redis`` is needed only for the Redis stores.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .audit import LeaseAudit, LeaseAuditor
from .base import AcquireResult, AsyncLease, AsyncLeaseStore, Lease, LeaseStore
from .holder import HolderId, holder_alive
from .sqlite_store import AsyncSqliteLeaseStore, SqliteLeaseStore

if TYPE_CHECKING:
    from .redis_store import AsyncRedisLeaseStore, RedisLeaseStore

__all__ = [
    "AcquireResult",
    "AsyncLease",
    "AsyncLeaseStore",
    "AsyncRedisLeaseStore",
    "AsyncSqliteLeaseStore",
    "HolderId",
    "Lease",
    "LeaseAudit",
    "LeaseAuditor",
    "LeaseStore",
    "RedisLeaseStore",
    "SqliteLeaseStore",
    "holder_alive",
]


def __getattr__(name: str) -> Any:
    if name in {"RedisLeaseStore", "AsyncRedisLeaseStore"}:
        from . import redis_store

        return getattr(redis_store, name)
    raise AttributeError(name)
