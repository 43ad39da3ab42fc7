"""The global quota of drill 3, two ways: the anonymous counter of failure class 3 and named leases.

Both live in embedded SQLite by default (one file in the demo's temp dir); leases may
use a real Redis instead. The holder processes and the orchestrator build their stores
here, so both sides agree on names, limits and timeouts.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..core.errors import ConfigError
from ..observer import Observer

QUOTA: Final = "demo-model"
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS demo_quota ("
    " name TEXT PRIMARY KEY, used INTEGER NOT NULL DEFAULT 0, done INTEGER NOT NULL DEFAULT 0)"
)


class AnonymousCounter:
    """The bug on purpose: INCR to take a slot, DECR to give it back, no holder recorded.

    A holder that dies between the two leaks its slot forever; nobody can tell whose it
    was. ``done`` counts completed holds (per scheme row) so throughput can be plotted.
    The counter has its own SQLite file, so its traffic never slows the lease store, and
    one connection per process used under a lock (threads of one holder share it).
    """

    def __init__(self, path: str | Path, limit: int, *, create: bool = False) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), isolation_level=None, timeout=10,
                                   check_same_thread=False)
        self._db.execute("PRAGMA busy_timeout = 10000")
        if create:  # once, by the orchestrator, before any holder starts
            self._db.execute("PRAGMA journal_mode = WAL")
            self._db.execute(_SCHEMA)
            for name in ("counter", "leases"):
                self._db.execute("INSERT OR IGNORE INTO demo_quota (name) VALUES (?)", (name,))
        self._db.execute("PRAGMA synchronous = NORMAL")

    def _write(self, sql: str, *args: object) -> int:
        with self._lock:
            return self._db.execute(sql, args).rowcount

    def take(self) -> bool:
        """INCR if below the limit (one conditional UPDATE, so it never oversells)."""
        return self._write("UPDATE demo_quota SET used = used + 1"
                           " WHERE name = 'counter' AND used < ?", self.limit) == 1

    def give_back(self) -> None:
        """DECR, and count one completed hold."""
        self._write("UPDATE demo_quota SET used = used - 1, done = done + 1"
                    " WHERE name = 'counter'")

    def lease_done(self) -> None:
        """Count one completed hold under a lease (the lease itself lives in its store)."""
        self._write("UPDATE demo_quota SET done = done + 1 WHERE name = 'leases'")

    def read(self) -> dict[str, tuple[int, int]]:
        """``{scheme: (used, done)}``; ``used`` of the leases row is unused (0)."""
        with self._lock:
            rows = self._db.execute("SELECT name, used, done FROM demo_quota").fetchall()
        return {name: (int(used), int(done)) for name, used, done in rows}

    def close(self) -> None:
        with self._lock:
            self._db.close()


@dataclass(frozen=True)
class QuotaConfig:
    """Where and how the leases live; passed to holders on their command line."""

    db: str
    counter_db: str
    limit: int
    timeout: float
    redis_url: str | None = None
    redis_key: str | None = None

    def argv(self) -> list[str]:
        out = ["--db", self.db, "--counter-db", self.counter_db, "--limit", str(self.limit),
               "--lease-timeout", str(self.timeout)]
        if self.redis_url:
            out += ["--redis", self.redis_url, "--redis-key", str(self.redis_key)]
        return out


def lease_store(cfg: QuotaConfig, *, worker: str, observer: Observer | None = None,
                asynchronous: bool = False) -> Any:
    """A lease store for ``cfg``: SQLite (default) or Redis, blocking or asyncio."""
    # The demo's timeouts are short (1-2 s, so ghosts go while you watch): the store's own
    # waits must stay well inside them, or the store refuses the timeout (a renewal could
    # wait past expiry). A quarter of the timeout for a lock or a socket is plenty here.
    wait = cfg.timeout / 4
    opts: dict[str, Any] = {"limit": cfg.limit, "timeout": cfg.timeout, "worker": worker,
                            "observer": observer, "heartbeat_interval": cfg.timeout / 3}
    if cfg.redis_url:
        from ..leases import redis_store

        cls = redis_store.AsyncRedisLeaseStore if asynchronous else redis_store.RedisLeaseStore
        return cls(QUOTA, cfg.redis_url, key=cfg.redis_key, socket_timeout=wait * 0.7,
                   connect_timeout=wait * 0.3, **opts)
    from ..leases import AsyncSqliteLeaseStore, SqliteLeaseStore

    sqlite_cls = AsyncSqliteLeaseStore if asynchronous else SqliteLeaseStore
    return sqlite_cls(QUOTA, cfg.db, busy_timeout=wait, **opts)


def check_redis(url: str) -> None:
    """Fail early, in one line, when ``--redis`` cannot be used."""
    if not url.strip():
        raise ConfigError("empty URL (expected redis://host:port/db)", source="--redis")
    try:
        import redis
    except ImportError:
        raise ConfigError("the redis package is not installed (pip install "
                          "'corevo-obs[redis]')", source="--redis") from None
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=1.0, socket_timeout=2.0)
        client.ping()
        client.close()
    except (ValueError, redis.RedisError) as exc:
        raise ConfigError(f"cannot use {url}: {exc}", source="--redis") from None

