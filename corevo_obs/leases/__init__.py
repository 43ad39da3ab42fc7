"""Named, heartbeated leases on a global concurrency quota (Redis ZSET or SQLite).

Backends are imported lazily: ``redis`` is needed only for the Redis stores and the
sharded quota. The guarantee each part gives, and what it cannot cover, is in
docs/leases-claims.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core import lazy
from ..core.errors import LeaseLost, LeaseRejected
from .audit import AsyncLeaseAuditor, LeaseAudit, LeaseAuditor
from .base import AcquireResult, AsyncHold, AsyncLease, AsyncLeaseStore, Hold, Lease, LeaseStore
from .breaker import BreakerOpen, CircuitBreaker
from .holder import HolderId, holder_alive
from .sqlite_store import AsyncSqliteLeaseStore, SqliteLeaseStore

if TYPE_CHECKING:
    from .buffer import AsyncLeaseBuffer, LeaseBuffer
    from .redis_store import AsyncRedisLeaseStore, RedisLeaseStore, ReplicaLag
    from .sharded import AsyncShardedLeaseStore, ShardedLeaseStore

__all__ = [
    "AcquireResult",
    "AsyncHold",
    "AsyncLease",
    "AsyncLeaseAuditor",
    "AsyncLeaseBuffer",
    "AsyncLeaseStore",
    "AsyncRedisLeaseStore",
    "AsyncShardedLeaseStore",
    "AsyncSqliteLeaseStore",
    "BreakerOpen",
    "CircuitBreaker",
    "Hold",
    "HolderId",
    "Lease",
    "LeaseAudit",
    "LeaseAuditor",
    "LeaseBuffer",
    "LeaseLost",
    "LeaseRejected",
    "LeaseStore",
    "RedisLeaseStore",
    "ReplicaLag",
    "ShardedLeaseStore",
    "SqliteLeaseStore",
    "holder_alive",
]


_LAZY = {"RedisLeaseStore": "redis_store", "AsyncRedisLeaseStore": "redis_store",
         "ReplicaLag": "redis_store", "ShardedLeaseStore": "sharded",
         "AsyncShardedLeaseStore": "sharded", "LeaseBuffer": "buffer",
         "AsyncLeaseBuffer": "buffer"}


def __getattr__(name: str) -> Any:
    return lazy.attribute(__name__, _LAZY, globals(), name)
