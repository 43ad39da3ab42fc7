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
    ``cluster://HOST:PORT?shards=K[&spill=S][&buffer=B&idle_ms=I]`` is a sharded quota on
    a Redis Cluster (its rebalancer started when asynchronous; a fresh one gets its first
    round at once), with ``buffer`` seen through a ``LeaseBuffer`` of B slots whose
    ``close()`` closes the store too;
    ``sentinel://HOST:PORT,HOST:PORT/SERVICE?replicas=1`` a store on the Sentinel-managed
    primary that waits for ``replicas``.
    """
    from corevo_obs.leases import AsyncSqliteLeaseStore, SqliteLeaseStore

    if str(where).startswith(("cluster://", "sentinel://")):
        return _topology_store(str(where), quota, asynchronous=asynchronous, fresh=fresh,
                               **opts)
    if str(where).startswith("redis://"):
        from corevo_obs.leases.redis_store import AsyncRedisLeaseStore, RedisLeaseStore

        cls: Any = AsyncRedisLeaseStore if asynchronous else RedisLeaseStore
        store = cls(quota, str(where), **{**REDIS_FAST, **opts})
        if fresh and not asynchronous:
            store.declare_fresh()
        return store
    cls = AsyncSqliteLeaseStore if asynchronous else SqliteLeaseStore
    return cls(quota, where, **{**SQLITE_FAST, **opts})


def _topology_store(where: str, quota: str, *, asynchronous: bool, fresh: bool,
                    **opts: Any) -> Any:
    from urllib.parse import parse_qs, urlsplit

    from redis.backoff import NoBackoff

    url = urlsplit(where)
    query = {k: int(v[0]) for k, v in parse_qs(url.query).items()}
    waits = {"socket_timeout": opts.pop("socket_timeout", REDIS_FAST["socket_timeout"]),
             "socket_connect_timeout": opts.pop("connect_timeout",
                                                REDIS_FAST["connect_timeout"])}
    if asynchronous:
        import redis.asyncio.cluster as cluster_mod
        import redis.asyncio.sentinel as sentinel_mod
        from redis.asyncio.retry import Retry
    else:
        import redis.cluster as cluster_mod  # type: ignore[no-redef]
        import redis.sentinel as sentinel_mod  # type: ignore[no-redef]
        from redis.retry import Retry  # type: ignore[assignment]
    if url.scheme == "cluster":
        from corevo_obs.leases.sharded import AsyncShardedLeaseStore, ShardedLeaseStore

        client = cluster_mod.RedisCluster(host=url.hostname, port=url.port or 6379,
                                          retry=Retry(NoBackoff(), 0), **waits)
        cls: Any = AsyncShardedLeaseStore if asynchronous else ShardedLeaseStore
        store = cls(quota, client, shards=query.get("shards", 3), spill=query.get("spill"),
                    **opts)
        if asynchronous:
            store.start_rebalancer()
        elif fresh:
            store.declare_fresh()
            store.rebalance()
        if "buffer" in query:
            return _buffered(store, query["buffer"], query.get("idle_ms", 500) / 1000,
                             asynchronous=asynchronous)
        return store
    from corevo_obs.leases.redis_store import AsyncRedisLeaseStore, RedisLeaseStore

    addrs = [(h, int(p)) for h, p in (a.split(":") for a in url.netloc.split(","))]
    sentinel = sentinel_mod.Sentinel(addrs, sentinel_kwargs=dict(waits), **waits)
    client = sentinel.master_for(url.path.strip("/"), retry=Retry(NoBackoff(), 0), **waits)
    cls = AsyncRedisLeaseStore if asynchronous else RedisLeaseStore
    store = cls(quota, client, replicas=query.get("replicas", 1), **opts)
    if fresh and not asynchronous:
        store.declare_fresh()
    return store


def _buffered(store: Any, size: int, idle: float, *, asynchronous: bool) -> Any:
    """A ``LeaseBuffer`` (or its asyncio twin) on ``store`` that closes the store with it."""
    from corevo_obs.leases.buffer import AsyncLeaseBuffer, LeaseBuffer

    if asynchronous:
        class Async(AsyncLeaseBuffer):
            async def aclose(self) -> None:
                await super().aclose()
                await self.store.aclose()

        return Async(store, size=size, idle=idle)

    class Sync(LeaseBuffer):
        def close(self) -> None:
            super().close()
            self.store.close()

    return Sync(store, size=size, idle=idle)
