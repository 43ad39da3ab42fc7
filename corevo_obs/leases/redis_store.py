"""Leases in a Redis ZSET: member = holder id, score = last heartbeat (unix seconds).

Acquire is one Lua script, so reaping, counting and adding cannot interleave with
another worker's acquire, and the reaped/held numbers in the metrics come from that same
atomic step. Reaping is lazy (done by acquires): the busier the quota, the sooner ghosts
go. Heartbeat is a script too, because a plain ZADD would re-add a reaped holder past the
limit; it renews only a member that is still present.

Time is the caller's clock (``clock=``): hosts sharing a quota need synchronised clocks
to within a small fraction of the timeout. ``redis`` is imported only when used.
"""

from __future__ import annotations

from typing import Any, Final

from .base import AcquireResult, AsyncLeaseStore, LeaseStore

# KEYS[1] quota zset. ARGV: now, cutoff (reap scores below it), limit, holder.
# A holder already present is refreshed and never takes a second slot (safe retry).
ACQUIRE_LUA: Final = """
local reaped = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[2])
local held = redis.call('ZCARD', KEYS[1])
local granted = 0
if held < tonumber(ARGV[3]) or redis.call('ZSCORE', KEYS[1], ARGV[4]) then
  held = held + redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
  granted = 1
end
return {granted, reaped, held}
"""

# KEYS[1] quota zset. ARGV: now, holder. 1 if renewed, 0 if the holder was reaped.
RENEW_LUA: Final = """
if redis.call('ZSCORE', KEYS[1], ARGV[2]) then
  redis.call('ZADD', KEYS[1], 'XX', ARGV[1], ARGV[2])
  return 1
end
return 0
"""

KEY_PREFIX: Final = "corevo:lease:"
CONNECT_TIMEOUT: Final = 1.0
SOCKET_TIMEOUT: Final = 2.0


def _members(rows: Any) -> list[tuple[str, float]]:
    return [(m.decode() if isinstance(m, bytes) else m, float(s)) for m, s in rows]


class _RedisSetup:
    """Client, key and registered scripts: the same for the blocking and asyncio stores."""

    def _setup(self, quota: str, client: Any, key: str | None, *, asyncio: bool) -> None:
        self._owned = isinstance(client, str)
        if isinstance(client, str):
            if asyncio:
                import redis.asyncio as module
            else:
                import redis as module  # type: ignore[no-redef]
            # Short timeouts: a down backend must become a fast rejection, not a hung task.
            client = module.Redis.from_url(
                client, socket_connect_timeout=CONNECT_TIMEOUT, socket_timeout=SOCKET_TIMEOUT
            )
        self.client = client
        self.key = key or KEY_PREFIX + quota
        self._acquire_script = client.register_script(ACQUIRE_LUA)
        self._renew_script = client.register_script(RENEW_LUA)


class RedisLeaseStore(_RedisSetup, LeaseStore):
    """Blocking store on ``redis.Redis`` (give a client or a URL).

    Example::

        store = RedisLeaseStore("llm", "redis://127.0.0.1:6379/0", limit=10, timeout=30)
    """

    def __init__(self, quota: str, client: Any, *, limit: int, key: str | None = None,
                 **options: Any) -> None:
        super().__init__(quota, limit=limit, **options)
        self._setup(quota, client, key, asyncio=False)

    def _try_acquire(self, holder: str, now: float) -> AcquireResult:
        # Inline, not helpers: this is the hot path the bench measures (Lua integers
        # arrive as ints, so no conversions either).
        granted, reaped, held = self._acquire_script(
            keys=[self.key], args=[repr(now), repr(now - self.timeout), self.limit, holder])
        return AcquireResult(granted == 1, reaped, held)

    def _renew(self, holder: str, now: float) -> bool:
        return bool(self._renew_script(keys=[self.key], args=[repr(now), holder]))

    def _remove(self, holder: str) -> bool:
        return bool(self.client.zrem(self.key, holder))

    def holders(self) -> list[tuple[str, float]]:
        return _members(self.client.zrange(self.key, 0, -1, withscores=True))

    def close(self) -> None:
        if self._owned:
            self.client.close()


class AsyncRedisLeaseStore(_RedisSetup, AsyncLeaseStore):
    """The same store on ``redis.asyncio.Redis`` (give a client or a URL)."""

    def __init__(self, quota: str, client: Any, *, limit: int, key: str | None = None,
                 **options: Any) -> None:
        super().__init__(quota, limit=limit, **options)
        self._setup(quota, client, key, asyncio=True)

    async def _try_acquire(self, holder: str, now: float) -> AcquireResult:
        granted, reaped, held = await self._acquire_script(
            keys=[self.key], args=[repr(now), repr(now - self.timeout), self.limit, holder])
        return AcquireResult(granted == 1, reaped, held)

    async def _renew(self, holder: str, now: float) -> bool:
        return bool(await self._renew_script(keys=[self.key], args=[repr(now), holder]))

    async def _remove(self, holder: str) -> bool:
        return bool(await self.client.zrem(self.key, holder))

    async def holders(self) -> list[tuple[str, float]]:
        return _members(await self.client.zrange(self.key, 0, -1, withscores=True))

    async def close(self) -> None:
        if self._owned:
            await self.client.aclose()
