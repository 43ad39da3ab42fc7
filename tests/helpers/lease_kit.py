"""Lease stores with short waits for tests: a 1 s timeout is valid only when the store's
own waits (Redis socket/connect timeouts, SQLite busy timeout) are well below it.

Importable in-process (``tests.helpers.lease_kit``) and from child processes (the
helpers directory is on their PYTHONPATH).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

REDIS_FAST: dict[str, float] = {"socket_timeout": 0.2, "connect_timeout": 0.1}
SQLITE_FAST: dict[str, float] = {"busy_timeout": 0.2}


def store_for(where: str | Path, quota: str, *, asynchronous: bool = False,
              fresh: bool = False, **opts: Any) -> Any:
    """A Redis store for a ``redis://`` URL, else SQLite; short waits unless given.

    ``fresh`` declares a Redis quota new (no restart fence): tests flush their server.
    """
    from corevo_obs.leases import AsyncSqliteLeaseStore, SqliteLeaseStore

    if str(where).startswith("redis://"):
        from corevo_obs.leases.redis_store import AsyncRedisLeaseStore, RedisLeaseStore

        cls: Any = AsyncRedisLeaseStore if asynchronous else RedisLeaseStore
        store = cls(quota, str(where), **{**REDIS_FAST, **opts})
        if fresh and not asynchronous:
            store.declare_fresh()
        return store
    cls = AsyncSqliteLeaseStore if asynchronous else SqliteLeaseStore
    return cls(quota, where, **{**SQLITE_FAST, **opts})
