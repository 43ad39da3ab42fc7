"""Named, heartbeated leases on a global concurrency quota (Redis ZSET or SQLite).

Backends are imported lazily: ``redis`` is needed only for the Redis stores. The
guarantee each part gives, and what it cannot cover, is in docs/leases-claims.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import LeaseLost, LeaseRejected
from .audit import LeaseAudit, LeaseAuditor
from .base import AcquireResult, AsyncHold, AsyncLease, AsyncLeaseStore, Hold, Lease, LeaseStore
from .holder import HolderId, holder_alive
from .sqlite_store import AsyncSqliteLeaseStore, SqliteLeaseStore

if TYPE_CHECKING:
    from .redis_store import AsyncRedisLeaseStore, RedisLeaseStore

__all__ = [
    "AcquireResult",
    "AsyncHold",
    "AsyncLease",
    "AsyncLeaseStore",
    "AsyncRedisLeaseStore",
    "AsyncSqliteLeaseStore",
    "Hold",
    "HolderId",
    "Lease",
    "LeaseAudit",
    "LeaseAuditor",
    "LeaseLost",
    "LeaseRejected",
    "LeaseStore",
    "RedisLeaseStore",
    "SqliteLeaseStore",
    "holder_alive",
]


def __getattr__(name: str) -> Any:
    if name in {"RedisLeaseStore", "AsyncRedisLeaseStore"}:
        from . import redis_store

        value = globals()[name] = getattr(redis_store, name)  # resolved once
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
