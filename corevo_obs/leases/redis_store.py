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
keyspace, and a run key (``…:run``) the ``run_id`` of the server that wrote it (read by the
script itself from ``INFO server`` on every acquire, the one way a script can tell one
server process from another; it adds a few µs of server time). When the
marker is missing — a first use, a restart without persistence, a FLUSHALL/FLUSHDB — or the
run id is another — any restart, from an RDB snapshot or an AOF that restored the marker but
not the grants made after it; a replica promoted; a restored backup — the script writes both
and refuses grants (outcome ``fenced``) until one lease timeout has passed, so every holder
from before has stopped on its own deadline. The check runs in the acquire script, on the
server that grants, so plain, Sentinel-managed and Cluster clients get it alike, with or
without replicas; renewals need none (a lost grant's renewal finds no member). The fencing
token is the server time of the grant in µs, or one more than the last token: it grows
across restarts as long as the server clock does not step back. All keys of a quota share
the hash tag ``{quota}`` (one Cluster slot), so every script runs on one slot: the stores
take a ``redis.cluster.RedisCluster`` (or its asyncio twin) as well as a plain client, and
EVALSHA is routed by the quota's key.

Failover without lost grants (a primary with replicas, e.g. behind Sentinel):
``replicas=1`` acknowledges a grant only after ``WAIT 1 <wait_timeout>`` says a replica has
it (else the grant is given back and rejected, counted), and a renewal counts as confirmed
only once replicated too. ``redis`` is imported only when used.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any, Final, Literal

from prometheus_client import CollectorRegistry

from ..core.errors import ConfigError, CorevoObsError
from ..core.guard import absorb
from ..core.marker import blocking
from ..observer import Observer
from .base import (
    DEFAULT_TIMEOUT,
    AcquireResult,
    AsyncLeaseStore,
    Counted,
    LeaseStore,
    _LeaseCore,
    _number,
)
from .breaker import CircuitBreaker
from .provision import fence_hint, log, provision_command

# With this module (imported with the store class, before a loop runs), not in a store's
# constructor: called on the loop, that import (0.2-1.2 s) was counted as the host's stall.
with contextlib.suppress(ImportError):  # the redis extra: its absence is raised on use
    import redis.asyncio.retry  # noqa: F401
    import redis.backoff  # noqa: F401
    import redis.retry  # noqa: F401

NOW_LUA: Final = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local stamp = t[1] .. '.' .. string.format('%06d', tonumber(t[2]))
"""

_RUN_ID: Final = "string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')"


def fence_lua(marker: str, run: str, *, limit: str | None = None) -> str:
    """The restart fence's Lua (after ``NOW_LUA``): sets ``mark``, the server time the fence
    of this keyspace started. A missing marker or a run key naming another server process
    starts it now (both are written); with ``limit`` (a shard's limit key) the limit goes
    back to 0 too, since a restored one may hold slots the rebalancer has since given to
    other shards. Shared by the acquire and the shard-limit scripts, so whichever runs
    first after a restart sees it."""
    reset = f"  redis.call('DEL', {limit})\n" if limit else ""
    return (f"local mark = tonumber(redis.call('GET', {marker}))\n"
            f"local run = {_RUN_ID}\n"
            f"if redis.call('GET', {run}) ~= run then\n"
            f"  redis.call('SET', {run}, run)\n  mark = nil\nend\n"
            f"if not mark then\n  redis.call('SET', {marker}, stamp)\n  mark = now\n"
            f"{reset}end\n")


def acquire_lua(*, limit_key: bool = False) -> str:
    """The acquire script.

    KEYS: quota zset, marker, token counter, run-id key, then the limit and misses keys
    (``limit_key``: a limit kept in Redis, as a sharded quota's shards have; a rejection of
    an admission's last chance counts one miss).
    ARGV: timeout, limit (the default when the limit key is absent), holder, and with
    ``limit_key`` '1' when this try is the admission's last chance (sharded.py).
    Returns {granted (1 granted, 0 rejected, 2 fenced), reaped, held, token} and, with
    ``limit_key``, the limit applied. A holder already present is refreshed and never takes
    a second slot (safe retry).
    """
    fence = fence_lua("KEYS[2]", "KEYS[4]", limit="KEYS[5]" if limit_key else None)
    lim = "local l = tonumber(redis.call('GET', KEYS[5]))\nif l then limit = l end\n" \
        if limit_key else ""
    miss = "if ARGV[4] == '1' then redis.call('INCR', KEYS[6]) end\n" if limit_key else ""
    tail = ", limit}" if limit_key else "}"
    return NOW_LUA + f"""
local timeout = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
{fence}{lim}if now < mark + timeout then
  return {{2, 0, redis.call('ZCARD', KEYS[1]), 0{tail}
end
local reaped = redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf',
                          '(' .. string.format('%.6f', now - timeout))
local held = redis.call('ZCARD', KEYS[1])
if held < limit or redis.call('ZSCORE', KEYS[1], ARGV[3]) then
  held = held + redis.call('ZADD', KEYS[1], stamp, ARGV[3])
  local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local token = redis.call('INCR', KEYS[3])
  if token < us then
    redis.call('SET', KEYS[3], string.format('%d', us))
    token = us
  end
  return {{1, reaped, held, token{tail}
end
{miss}return {{0, reaped, held, 0{tail}
"""


ACQUIRE_LUA: Final = acquire_lua()

# The live holders after a renewal or a release, as an acquire would count them (members
# whose heartbeat is within the timeout): the held gauge stays current without an acquire.
_LIVE: Final = ("redis.call('ZCOUNT', KEYS[1], string.format('%.6f', now - tonumber(ARGV[1])),"
                " '+inf')")

# KEYS: quota zset. ARGV: timeout, holder. {1 if renewed, 0 if reaped or expired; live}.
RENEW_LUA: Final = NOW_LUA + f"""
local score = redis.call('ZSCORE', KEYS[1], ARGV[2])
if not score then
  return {{0, {_LIVE}}}
end
if tonumber(score) < now - tonumber(ARGV[1]) then
  redis.call('ZREM', KEYS[1], ARGV[2])
  return {{0, {_LIVE}}}
end
redis.call('ZADD', KEYS[1], 'XX', stamp, ARGV[2])
return {{1, {_LIVE}}}
"""

# KEYS: quota zset. ARGV: timeout, holder. {1 if removed, 0 if absent; live}.
RELEASE_LUA: Final = NOW_LUA + f"""
local removed = redis.call('ZREM', KEYS[1], ARGV[2])
return {{removed, {_LIVE}}}
"""

# KEYS: marker, run-id key. Ends a fence: the quota is declared new (``declare_fresh``).
FRESH_LUA: Final = ("redis.call('SET', KEYS[1], '0') redis.call('SET', KEYS[2], "
                    + _RUN_ID + ") return 1")

# KEYS: marker, run-id key. Provisioning: writes the marker of a quota that has none
# (a new quota is not fenced); an existing marker, and so a running fence, is left alone.
PROVISION_LUA: Final = ("if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end "
                        "redis.call('SET', KEYS[1], '0') redis.call('SET', KEYS[2], "
                        + _RUN_ID + ") return 1")

KEY_PREFIX: Final = "corevo:lease:"
CONNECT_TIMEOUT: Final = 1.0
SOCKET_TIMEOUT: Final = 2.0
#: the WAIT for a replica's confirmation of a grant or renewal (``replicas=``)
WAIT_TIMEOUT: Final = 0.1


def quota_keys(quota: str, key: str | None = None) -> tuple[str, str, str, str]:
    """The zset, marker, token and run-id keys of a quota (one hash tag unless ``key`` is
    given): the first four keys of the acquire script."""
    base = key or f"{KEY_PREFIX}{{{quota}}}"
    return base, f"{base}:marker", f"{base}:token", f"{base}:run"


class ReplicaLag(CorevoObsError):
    """No replica confirmed a write within the WAIT timeout. The primary answered, so
    this is not a backend failure for the circuit breaker."""

    backend_answered = True

    def __init__(self, quota: str, acked: int, wanted: int) -> None:
        self.quota, self.acked, self.wanted = quota, acked, wanted
        super().__init__(f"lease {quota}: {acked} of {wanted} replicas confirmed in time")


def _members(rows: Any) -> list[tuple[str, float]]:
    return [(m.decode() if isinstance(m, bytes) else m, float(s)) for m, s in rows]


def _server_time(reply: Any) -> float:
    seconds, micros = reply
    return int(seconds) + int(micros) / 1e6


def is_cluster(client: Any) -> bool:
    """A ``RedisCluster`` (sync or asyncio): commands without keys need a target node."""
    return hasattr(client, "get_node_from_key") and hasattr(client, "nodes_manager")


def _kwargs_of(client: Any) -> dict[str, Any]:
    if is_cluster(client):
        found = getattr(client, "connection_kwargs", None)  # asyncio cluster
        return dict(found if found is not None else client.nodes_manager.connection_kwargs)
    return dict(getattr(getattr(client, "connection_pool", None), "connection_kwargs", {}))


def _per_try(kwargs: dict[str, Any], what: str) -> float:
    read, connect = kwargs.get("socket_timeout"), kwargs.get("socket_connect_timeout")
    if read is None:
        raise ConfigError(f"the {what} has no socket_timeout: a frozen server would block "
                          "a renewal forever", source="lease store")
    return float(read) + float(connect if connect is not None else read)


def _client_waits(client: Any) -> float:
    """How long one command of a given client may block: (connect + read) per try, plus
    the Sentinel look-up of the primary a fresh connection makes (each Sentinel in turn)."""
    kwargs = _kwargs_of(client)
    per_try = _per_try(kwargs, "Redis client")
    retry = getattr(client, "retry", None) if is_cluster(client) else kwargs.get("retry")
    tries = 1 + max(0, int(getattr(retry, "_retries", 0) or 0))
    manager = getattr(getattr(client, "connection_pool", None), "sentinel_manager", None)
    lookup = sum(_per_try(dict(s.connection_pool.connection_kwargs), "Sentinel client")
                 for s in getattr(manager, "sentinels", ()))
    return tries * (per_try + lookup)


Breaker = CircuitBreaker | None | Literal["default"]


class _RedisSetup(_LeaseCore):
    """Client, keys and registered scripts: the same for the blocking and asyncio stores."""
    #: the asyncio store (its URL builds a ``redis.asyncio`` client)
    _asyncio: bool
    #: a sharded quota's shards keep a limit key (``sharded.py``); a plain quota has none
    _limit_key = False

    def __init__(self, quota: str, client: Any, *, limit: int, key: str | None = None,
                 socket_timeout: float = SOCKET_TIMEOUT,
                 connect_timeout: float = CONNECT_TIMEOUT, replicas: int = 0,
                 wait_timeout: float = WAIT_TIMEOUT, replica_fail_open: bool = False,
                 timeout: float = DEFAULT_TIMEOUT, heartbeat_interval: float | None = None,
                 margin: float | None = None, fail_open: bool = False,
                 breaker: CircuitBreaker | bool = True, observer: Observer | None = None,
                 worker: str | None = None, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        """One constructor for both stores (their options are the same); the class says
        which client kind a URL builds (``_asyncio``)."""
        self._setup(quota, client, key, asyncio=self._asyncio, socket_timeout=socket_timeout,
                    connect_timeout=connect_timeout, replicas=replicas,
                    wait_timeout=wait_timeout, replica_fail_open=replica_fail_open,
                    limit_key=self._limit_key)
        super().__init__(quota, limit=limit, timeout=timeout,
                         heartbeat_interval=heartbeat_interval, margin=margin,
                         fail_open=fail_open, breaker=breaker, observer=observer,
                         worker=worker, registry=registry, clock=clock)



    def _setup(self, quota: str, client: Any, key: str | None, *, asyncio: bool,
               socket_timeout: float, connect_timeout: float, replicas: int,
               wait_timeout: float, replica_fail_open: bool,
               limit_key: bool = False) -> None:
        if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
            raise ConfigError(f"replicas must be an int >= 0, got {replicas!r}",
                              source="lease store")
        self.replicas = replicas
        self.wait_timeout = _number(wait_timeout, "wait_timeout")
        self.replica_fail_open = replica_fail_open
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
        if replicas:
            self._zeroed: tuple[str, ...] = ("lease-store", "lease-replicas")  # from start
            read = _kwargs_of(client).get("socket_timeout") or socket_timeout
            if self.wait_timeout >= float(read):
                raise ConfigError(f"wait_timeout {self.wait_timeout:.3g}s must be below the "
                                  f"socket timeout {float(read):.3g}s", source="lease store")
            self._wait += float(read)  # the WAIT itself, on the same connection
        self.client = client
        self._node_kw: dict[str, Any] = {}
        self.key, self.marker_key, self.token_key, self.run_key = quota_keys(quota, key)
        # a restart, a failover or a restore is detected by the run id kept with the marker
        keys = [self.key, self.marker_key, self.token_key, self.run_key]
        self._fresh_keys = [self.marker_key, self.run_key]
        if limit_key:
            self.limit_key, self.misses_key = f"{self.key}:limit", f"{self.key}:misses"
            keys += [self.limit_key, self.misses_key]
        self.keys = keys
        self._acquire_script = client.register_script(
            acquire_lua(limit_key=limit_key))
        self._renew_script = client.register_script(RENEW_LUA)
        self._release_script = client.register_script(RELEASE_LUA)
        self._fresh_script = client.register_script(FRESH_LUA)
        self._provision_script = client.register_script(PROVISION_LUA)
        self._hinted = False
        #: what the fence hint tells to run (a sharded quota names itself, not a shard)
        self.provision_command = provision_command(quota)

    def _node(self) -> dict[str, Any]:
        """``target_nodes=`` for a keyless command (TIME, WAIT) on a Cluster: the quota's
        primary; empty for a plain client."""
        if is_cluster(self.client):
            return {"target_nodes": self.client.get_node_from_key(self.key)}
        return {}

    def _lagged(self, op: Literal["acquire", "renew"], acked: Any) -> bool:
        """Whether a WAIT reply falls short of ``replicas``; a shortfall is counted."""
        if int(acked) >= self.replicas:
            return False
        try:
            self._telemetry.child("corevo_lease_replica_wait_timeouts_total",
                                  quota=self.quota, op=op).inc()
        except Exception as exc:  # noqa: BLE001
            absorb("lease-replica-wait", exc, telemetry=self._telemetry)
        return True

    def _hint_fence(self) -> None:
        """A fenced admission: say once per store what it means and what to run."""
        if not self._hinted:
            self._hinted = True
            log.warning(fence_hint(self.quota, type(self).__name__, self.provision_command))

    def store_wait(self) -> tuple[float, str]:
        return self._wait, "Redis connect + socket timeout"


class RedisLeaseStore(_RedisSetup, LeaseStore):
    """Blocking store on ``redis.Redis`` or ``redis.cluster.RedisCluster`` (give a client
    or a URL; a Sentinel-managed client from ``Sentinel.master_for`` is a plain client).

    From a URL the client gets ``socket_timeout`` (2 s) and ``connect_timeout`` (1 s)
    and no retries; their sum is the store wait that the timeout is checked against.
    ``replicas=1`` waits (``WAIT``, at most ``wait_timeout`` s) for a replica to have
    each grant and renewal, so confirmed ones survive a failover (the restart fence is
    on with any ``replicas``: see the module docstring);
    ``replica_fail_open=True`` keeps a grant no replica confirmed. ``breaker=True`` (the
    default) builds a ``CircuitBreaker`` for the quota (5 failures, a back-off of a
    quarter timeout); pass your own, or ``False`` for none. ``timeout``,
    ``heartbeat_interval``, ``margin``, ``fail_open``, ``observer``: as for every lease
    store (docs/leases-claims.md).

    Example::

        store = RedisLeaseStore("llm", "redis://127.0.0.1:6379/0", limit=10, timeout=30)
    """

    _asyncio = False

    def _replicated(self, op: Literal["acquire", "renew"]) -> bool:
        acked = self.client.execute_command(
            "WAIT", self.replicas, int(self.wait_timeout * 1000), **self._node())
        return not self._lagged(op, acked)

    def _try_acquire(self, holder: str) -> AcquireResult:
        # Inline, not helpers: this is the hot path the bench measures (Lua integers
        # arrive as ints, so no conversions either).
        granted, reaped, held, token = self._acquire_script(
            keys=self.keys, args=[self.timeout, self.limit, holder])
        if granted == 1 and self.replicas and self._taken_back(holder):
            return AcquireResult(False, reaped, held - 1)
        if granted == 2:
            self._hint_fence()
        return AcquireResult(granted == 1, reaped, held, token, granted == 2)

    def _taken_back(self, holder: str) -> bool:
        """A grant no replica confirmed in time is removed again (fail closed), unless
        ``replica_fail_open``; every subclass's acquire path must ask (sharded ones too)."""
        if self._replicated("acquire") or self.replica_fail_open:
            return False
        self.client.zrem(self.key, holder)
        return True

    def _renew(self, holder: str) -> Counted:
        renewed, live = self._renew_script(keys=[self.key], args=[self.timeout, holder])
        if renewed and self.replicas and not self._replicated("renew"):
            raise ReplicaLag(self.quota, 0, self.replicas)
        return Counted(renewed == 1, int(live))

    def _remove(self, holder: str) -> Counted:
        removed, live = self._release_script(keys=[self.key], args=[self.timeout, holder])
        return Counted(removed == 1, int(live))

    @blocking
    def holders(self) -> list[tuple[str, float]]:
        return _members(self.client.zrange(self.key, 0, -1, withscores=True))

    @blocking
    def server_time(self) -> float:
        return _server_time(self.client.execute_command("TIME", **self._node()))

    @blocking
    def declare_fresh(self) -> None:
        self._fresh_script(keys=self._fresh_keys)

    @blocking
    def provision(self) -> bool:
        return bool(self._provision_script(keys=self._fresh_keys))

    @blocking
    def close(self) -> None:
        if self._owned:
            self.client.close()


class AsyncRedisLeaseStore(_RedisSetup, AsyncLeaseStore):
    """The same store on ``redis.asyncio.Redis`` or ``redis.asyncio.cluster.RedisCluster``
    (give a client or a URL); the same options."""

    _asyncio = True

    async def _replicated(self, op: Literal["acquire", "renew"]) -> bool:
        acked = await self.client.execute_command(
            "WAIT", self.replicas, int(self.wait_timeout * 1000), **self._node())
        return not self._lagged(op, acked)

    async def _try_acquire(self, holder: str) -> AcquireResult:
        granted, reaped, held, token = await self._acquire_script(
            keys=self.keys, args=[self.timeout, self.limit, holder])
        if granted == 1 and self.replicas and await self._taken_back(holder):
            return AcquireResult(False, reaped, held - 1)
        if granted == 2:
            self._hint_fence()
        return AcquireResult(granted == 1, reaped, held, token, granted == 2)

    async def _taken_back(self, holder: str) -> bool:
        if await self._replicated("acquire") or self.replica_fail_open:
            return False
        await self.client.zrem(self.key, holder)
        return True

    async def _renew(self, holder: str) -> Counted:
        renewed, live = await self._renew_script(keys=[self.key], args=[self.timeout, holder])
        if renewed and self.replicas and not await self._replicated("renew"):
            raise ReplicaLag(self.quota, 0, self.replicas)
        return Counted(renewed == 1, int(live))

    async def _remove(self, holder: str) -> Counted:
        removed, live = await self._release_script(keys=[self.key],
                                                   args=[self.timeout, holder])
        return Counted(removed == 1, int(live))

    async def holders(self) -> list[tuple[str, float]]:
        return _members(await self.client.zrange(self.key, 0, -1, withscores=True))

    async def server_time(self) -> float:
        return _server_time(await self.client.execute_command("TIME", **self._node()))

    async def _declare_fresh(self) -> None:
        await self._fresh_script(keys=self._fresh_keys)

    async def _provision(self) -> bool:
        return bool(await self._provision_script(keys=self._fresh_keys))

    async def aclose(self) -> None:
        if self._owned:
            await self.client.aclose()
