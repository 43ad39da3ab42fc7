"""The cancel bus on Redis: a hash with PEXPIRE as the marker, PUBLISH as the wake-up.

``corevo:cancel:{<execution_id>}`` holds ``requested`` (and later ``acked``) and expires by
itself, so a marker nobody reads never outlives its TTL; the hash tag keeps the marker's
MULTI on one Cluster slot. Commands go to the owner's channel ``corevo:owner:<owner>``;
PUBLISH returns how many subscribers got one, which is how a gateway sees a wake-up that
reached nobody. On Redis >= 7 (and always on a ``RedisCluster``) the channel is a
*sharded* one (``SPUBLISH`` / ``SSUBSCRIBE``): on a Cluster a plain PUBLISH is copied to
every node, a sharded one goes only to the node that owns the channel's slot. The server
version is read once (``INFO server``); ``sharded=`` overrides it.

The subscriber's client never reconnects on its own: redis-py's PubSub reconnects and
resubscribes inside its failure handler even with zero retries, which would hide (and
shift) the window in which messages vanish. The inbox reconnects with its own pause and
counts the break. ``redis`` is imported with this module only.
"""

from __future__ import annotations

import contextlib
from typing import Any, Final

from .bus import CancelBus, Command, Subscription

# With this module (imported with the bus class, before a loop runs), not in the bus's
# constructor: called on the loop, that import was counted as the host's stall.
with contextlib.suppress(ImportError):  # the redis extra: its absence is raised on use
    import redis.asyncio.retry  # noqa: F401
    import redis.backoff  # noqa: F401

MARKER_PREFIX: Final = "corevo:cancel:"
CHANNEL_PREFIX: Final = "corevo:owner:"
CONNECT_TIMEOUT: Final = 1.0
SOCKET_TIMEOUT: Final = 2.0


def marker_key(execution_id: str) -> str:
    """The marker hash of an execution (its own hash tag: one Cluster slot)."""
    return f"{MARKER_PREFIX}{{{execution_id}}}"


async def subscriber_count(client: Any, channel: str) -> int:
    """Subscribers of ``channel`` on this server, plain and sharded (NUMSUB + SHARDNUMSUB)."""
    plain = dict(await client.pubsub_numsub(channel)).get(channel.encode(), 0)
    try:
        reply = await client.execute_command("PUBSUB", "SHARDNUMSUB", channel)
    except Exception:  # noqa: BLE001 - a server before 7 has no sharded channels
        return int(plain)
    flat = list(reply)
    return int(plain) + sum(int(n) for ch, n in zip(flat[::2], flat[1::2], strict=True)
                            if ch in (channel, channel.encode()))


def _is_cluster(client: Any) -> bool:
    return hasattr(client, "get_node_from_key") and hasattr(client, "nodes_manager")


def _no_reconnect() -> Any:
    """A ``Retry`` that runs the operation once and never calls the reconnect handler."""
    from redis.asyncio.retry import Retry
    from redis.backoff import NoBackoff

    class NoReconnect(Retry):
        async def call_with_retry(self, do: Any, fail: Any, *args: Any, **kw: Any) -> Any:
            return await do()

    return NoReconnect(NoBackoff(), 0)


class _RedisSubscription(Subscription):
    def __init__(self, pubsub: Any, *, cluster: bool = False) -> None:
        self._pubsub = pubsub
        self._get = pubsub.get_sharded_message if cluster else pubsub.get_message

    async def get(self) -> Command:
        while True:
            msg = await self._get(ignore_subscribe_messages=True, timeout=None)
            if msg is not None and msg.get("type") in ("message", "smessage"):
                return Command.decode(msg["data"])

    async def aclose(self) -> None:
        try:
            await self._pubsub.aclose()
        except Exception:  # noqa: BLE001 - closing a broken connection may fail; it is gone
            pass


class RedisCancelBus(CancelBus):
    """Give a URL (the bus makes and owns two clients) or a ``redis.asyncio.Redis``.

    Example::

        bus = RedisCancelBus("redis://127.0.0.1:6379/0")
    """

    def __init__(self, client: Any, *, sharded: bool | None = None) -> None:
        import redis.asyncio as aioredis

        self._sharded = sharded
        self._owned = isinstance(client, str)
        if isinstance(client, str):
            url = client
            client = aioredis.Redis.from_url(url, socket_connect_timeout=CONNECT_TIMEOUT,
                                             socket_timeout=SOCKET_TIMEOUT)
            # No socket timeout: a subscriber waits for messages indefinitely.
            self._sub_client = aioredis.Redis.from_url(
                url, socket_connect_timeout=CONNECT_TIMEOUT, retry=_no_reconnect())
        else:
            self._sub_client = client
        self.client = client

    async def sharded(self) -> bool:
        """Whether this bus uses sharded pub/sub (read once from the server)."""
        if self._sharded is None:
            if _is_cluster(self.client):
                self._sharded = True
            else:
                version = (await self.client.info("server")).get("redis_version", "0")
                self._sharded = int(str(version).split(".")[0]) >= 7
        return self._sharded

    async def _hset(self, execution_id: str, field: str, value: float, ttl: float) -> None:
        key = marker_key(execution_id)
        async with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(key, field, repr(value))
            pipe.pexpire(key, max(1, int(ttl * 1000)))
            await pipe.execute()

    async def _hget(self, execution_id: str, field: str) -> float | None:
        raw = await self.client.hget(marker_key(execution_id), field)
        return None if raw is None else float(raw)

    async def mark(self, execution_id: str, requested_at: float, ttl: float) -> None:
        await self._hset(execution_id, "requested", requested_at, ttl)

    async def marker(self, execution_id: str) -> float | None:
        return await self._hget(execution_id, "requested")

    async def acknowledge(self, execution_id: str, stopped_at: float, ttl: float) -> None:
        await self._hset(execution_id, "acked", stopped_at, ttl)

    async def acknowledged(self, execution_id: str) -> float | None:
        return await self._hget(execution_id, "acked")

    async def send(self, command: Command) -> int:
        channel, data = CHANNEL_PREFIX + command.owner, command.encode()
        if await self.sharded():
            return int(await self.client.spublish(channel, data))
        return int(await self.client.publish(channel, data))

    async def subscribe(self, owner: str) -> Subscription:
        sharded = await self.sharded()
        pubsub = self._sub_client.pubsub()
        try:
            if sharded:
                await pubsub.ssubscribe(CHANNEL_PREFIX + owner)
            else:
                await pubsub.subscribe(CHANNEL_PREFIX + owner)
        except BaseException:
            await pubsub.aclose()
            raise
        return _RedisSubscription(pubsub, cluster=_is_cluster(self._sub_client))

    async def aclose(self) -> None:
        if self._owned:
            await self.client.aclose()
            await self._sub_client.aclose()
