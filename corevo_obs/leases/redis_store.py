"""Leases in a Redis ZSET: member = holder id, score = last heartbeat (server unix seconds).

Acquire is one Lua script, so reaping, counting and adding cannot interleave with
another worker's acquire, and the reaped/held numbers in the metrics come from that same
atomic step. Reaping is lazy (done by acquires): the busier the quota, the sooner ghosts
go. Heartbeat is a script too, because a plain ZADD would re-add a reaped holder past the
limit; it renews only a member that is still present and not expired.

Time is the server's: each script reads ``redis.call('TIME')`` (Redis >= 5 replicates
scripts by effect, so a script may read the clock), never a client ``now``. A request
queued behind a frozen server is stamped when it runs, and a client clock that is off
changes nothing.

Restart fence: a per-quota marker key (no TTL) records when the script first saw this
keyspace. When it is missing — a first use, a restart without persistence, a failover to
a replica that lost it, a FLUSHALL — the script writes it and refuses grants (outcome
``fenced``) until one lease timeout has passed, so every holder from before has stopped
on its own deadline. The fencing token is the server time of the grant in µs, or one more
than the last token: it grows across restarts as long as the server clock does not step
back. All keys of a quota share the hash tag ``{quota}`` (one Cluster slot).
``redis`` is imported only when used.
"""

from __future__ import annotations

from typing import Any, Final

from ..errors import ConfigError
from .base import AcquireResult, AsyncLeaseStore, LeaseStore, _number

_NOW: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local stamp = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
"""

# KEYS: quota zset, marker, token counter. ARGV: timeout, limit, holder.
# Returns {granted (1 granted, 0 rejected, 2 fenced), reaped, held, token}.
# A holder already present is refreshed and never takes a second slot (safe retry).
ACQUIRE_LUA: Final = _NOW + """
local timeout = tonumber(ARGV[1])
local mark = tonumber(redis.call('GET', KEYS[2]))
if not mark then
  redis.call('SET', KEYS[2], stamp)
  mark = now
end
if now < mark + timeout then
  return {2, 0, redis.call('ZCARD', KEYS[1]), 0}
end
local reaped = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf',
                          '(' .. string.format('%.6f', now - timeout))
local held = redis.call('ZCARD', KEYS[1])
if held < tonumber(ARGV[2]) or redis.call('ZSCORE', KEYS[1], ARGV[3]) then
  held = held + redis.call('ZADD', KEYS[1], stamp, ARGV[3])
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local token = redis.call('INCR', KEYS[3])
  if token < us then
    redis.call('SET', KEYS[3], string.format('%d', us))
    token = us
  end
  return {1, reaped, held, token}
end
return {0, reaped, held, 0}
"""

# KEYS: quota zset. ARGV: timeout, holder. 1 if renewed, 0 if reaped or expired.
RENEW_LUA: Final = _NOW + """
local score = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not score then
  return 0
end
if tonumber(score) < now - tonumber(ARGV[1]) then
  redis.call('ZREM', KEYS[1], ARGV[2])
  return 0
end
redis.call('ZADD', KEYS[1], 'XX', stamp, ARGV[2])
return 1
"""

# KEYS: marker. Ends a fence: the quota is declared new (``declare_fresh``).
FRESH_LUA: Final = "redis.call('SET', KEYS[1], '0') return 1"

KEY_PREFIX: Final = "corevo:lease:"
CONNECT_TIMEOUT: Final = 1.0
SOCKET_TIMEOUT: Final = 2.0


def quota_keys(quota: str, key: str | None = None) -> tuple[str, str, str]:
    """The zset, marker and token keys of a quota (one hash tag unless ``key`` is given)."""
    base = key or f"{KEY_PREFIX}{{{quota}}}"
    return base, f"{base}:marker", f"{base}:token"


def _members(rows: Any) -> list[tuple[str, float]]:
    return [(m.decode() if isinstance(m, bytes) else m, float(s)) for m, s in rows]


def _server_time(reply: Any) -> float:
    seconds, micros = reply
    return int(seconds) + int(micros) / 1e6


def _client_waits(client: Any) -> float:
    """How long one command of a given client may block: (connect + read) per try."""
    kwargs = getattr(getattr(client, "connection_pool", None), "connection_kwargs", {})
    read, connect = kwargs.get("socket_timeout"), kwargs.get("socket_connect_timeout")
    if read is None:
        raise ConfigError("the Redis client has no socket_timeout: a frozen server would "
                          "block a renewal forever", source="lease store")
    retry = kwargs.get("retry")
    tries = 1 + max(0, int(getattr(retry, "_retries", 0) or 0))
    return tries * (float(read) + float(connect if connect is not None else read))


class _RedisSetup:
    """Client, keys and registered scripts: the same for the blocking and asyncio stores."""

    def _setup(self, quota: str, client: Any, key: str | None, *, asyncio: bool,
               socket_timeout: float, connect_timeout: float) -> None:
        self._owned = isinstance(client, str)
        if isinstance(client, str):
            socket_timeout = _number(socket_timeout, "socket_timeout")
            connect_timeout = _number(connect_timeout, "connect_timeout")
            if asyncio:
                import redis.asyncio as module
                from redis.asyncio.retry import Retry
            else:
                import redis as module  # type: ignore[no-redef]
                from redis.retry import Retry  # type: ignore[assignment]
            from redis.backoff import NoBackoff

            # Short timeouts and no retries: a down backend must become a fast rejection
            # (and a bounded renewal), not a hung task.
            client = module.Redis.from_url(
                client, socket_connect_timeout=connect_timeout, socket_timeout=socket_timeout,
                retry=Retry(NoBackoff(), 0),
            )
            self._wait = socket_timeout + connect_timeout
        else:
            self._wait = _client_waits(client)
        self.client = client
        self.key, self.marker_key, self.token_key = self.keys = quota_keys(quota, key)
        self._acquire_script = client.register_script(ACQUIRE_LUA)
        self._renew_script = client.register_script(RENEW_LUA)
        self._fresh_script = client.register_script(FRESH_LUA)

    def store_wait(self) -> tuple[float, str]:
        return self._wait, "Redis connect + socket timeout"


class RedisLeaseStore(_RedisSetup, LeaseStore):
    """Blocking store on ``redis.Redis`` (give a client or a URL).

    From a URL the client gets ``socket_timeout`` (2 s) and ``connect_timeout`` (1 s)
    and no retries; their sum is the store wait that the timeout is checked against.

    Example::

        store = RedisLeaseStore("llm", "redis://127.0.0.1:6379/0", limit=10, timeout=30)
    """

    def __init__(self, quota: str, client: Any, *, limit: int, key: str | None = None,
                 socket_timeout: float = SOCKET_TIMEOUT,
                 connect_timeout: float = CONNECT_TIMEOUT, **options: Any) -> None:
        self._setup(quota, client, key, asyncio=False, socket_timeout=socket_timeout,
                    connect_timeout=connect_timeout)
        super().__init__(quota, limit=limit, **options)

    def _try_acquire(self, holder: str) -> AcquireResult:
        # Inline, not helpers: this is the hot path the bench measures (Lua integers
        # arrive as ints, so no conversions either).
        granted, reaped, held, token = self._acquire_script(
            keys=self.keys, args=[self.timeout, self.limit, holder])
        return AcquireResult(granted == 1, reaped, held, token, granted == 2)

    def _renew(self, holder: str) -> bool:
        return bool(self._renew_script(keys=[self.key], args=[self.timeout, holder]))

    def _remove(self, holder: str) -> bool:
        return bool(self.client.zrem(self.key, holder))

    def holders(self) -> list[tuple[str, float]]:
        return _members(self.client.zrange(self.key, 0, -1, withscores=True))

    def server_time(self) -> float:
        return _server_time(self.client.time())

    def declare_fresh(self) -> None:
        self._fresh_script(keys=[self.marker_key])

    def close(self) -> None:
        if self._owned:
            self.client.close()


class AsyncRedisLeaseStore(_RedisSetup, AsyncLeaseStore):
    """The same store on ``redis.asyncio.Redis`` (give a client or a URL)."""

    def __init__(self, quota: str, client: Any, *, limit: int, key: str | None = None,
                 socket_timeout: float = SOCKET_TIMEOUT,
                 connect_timeout: float = CONNECT_TIMEOUT, **options: Any) -> None:
        self._setup(quota, client, key, asyncio=True, socket_timeout=socket_timeout,
                    connect_timeout=connect_timeout)
        super().__init__(quota, limit=limit, **options)

    async def _try_acquire(self, holder: str) -> AcquireResult:
        granted, reaped, held, token = await self._acquire_script(
            keys=self.keys, args=[self.timeout, self.limit, holder])
        return AcquireResult(granted == 1, reaped, held, token, granted == 2)

    async def _renew(self, holder: str) -> bool:
        return bool(await self._renew_script(keys=[self.key], args=[self.timeout, holder]))

    async def _remove(self, holder: str) -> bool:
        return bool(await self.client.zrem(self.key, holder))

    async def holders(self) -> list[tuple[str, float]]:
        return _members(await self.client.zrange(self.key, 0, -1, withscores=True))

    async def server_time(self) -> float:
        return _server_time(await self.client.time())

    async def declare_fresh(self) -> None:
        await self._fresh_script(keys=[self.marker_key])

    async def close(self) -> None:
        if self._owned:
            await self.client.aclose()
