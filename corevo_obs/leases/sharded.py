"""A hot quota split over shards: limit N as K lease quotas on different Cluster slots.

One quota is one hash tag, so on a Redis Cluster every admission of every worker lands on
one primary: the limiter becomes the bottleneck. A sharded quota spreads it. Each shard is
a lease quota of its own (a ZSET of named, heartbeated holders with the restart fence and
fencing tokens of ``redis_store``), whose limit is kept *in Redis* beside it
(``…:limit``), so every worker sees the same split. Shard names are chosen by slot
(``shard_names``): shard ``i`` of K gets a name whose hash slot lies in the i-th K-th of
the 16384 slots, so with the usual contiguous slot ranges the shards spread evenly over
the primaries — and the names depend only on (quota, K), never on a topology snapshot.

Admission: the candidates are the caller's shard (CRC32 of a caller key — a tenant, a
model — modulo K; a random one when no key is given) and the next ones (``home+1,
home+2, …``), up to ``spill`` shards. The first try goes to the home shard unless this
worker saw it full less than ``view_ttl`` (50 ms) ago; every other try (a spill, or the
first when home is seen full) goes to the candidate with the most free slots as last
seen (ties: the one seen longest ago), skipping candidates seen full within
``view_ttl``. The view comes from the replies the admissions get anyway — a failed
acquire returns the shard's held count and limit — and from releases and rebalance
writes, so a spill decision costs no read. When every candidate was seen full, one try
confirms it on the candidate seen longest ago: a rejection is always the server's word,
never the view's alone (a slot freed meanwhile by another worker is found on the stalest
shard first; one freed elsewhere within ``view_ttl`` is the exactness traded, measured as
the stranded share by the bench). So a hot key whose home is full takes slots wherever
they free up, on every primary, and a saturated quota rejects after one round trip,
spread over the shards. A rejection of an admission's last chance (no other candidate
left that was not seen full) counts a *miss* on that shard (in the acquire script):
demand that the candidates' limits did not cover — not a stale view that a spill
corrected.

Rebalance: the sum of shard limits never exceeds N at any instant. One worker at a time
rebalances — the holder of the lease ``<quota>.rebalance`` (limit 1) — every
``rebalance_every`` seconds: it reads every shard (limit, live holders, misses since the
last round), *lowers* shards with idle slots and no misses (at most half their free slots
per round, and never below their live holders: the lower runs in the shard's script, so
a grant cannot slip in between), then *raises* shards that had misses by what was taken,
plus any deficit (N minus the sum it read: the first round, a shard that restarted
empty). A shard whose restart fence runs (it restarted, failed over or was flushed; its
limit went back to 0, since a restored one may count slots given away since) stops every
raise until its fence ends — holders it lost may still be at work — and a shard's live
holders count against N even over its limit (restored holders on a reset shard). Every
limit write carries the rebalancer's fencing token and each shard keeps the
largest it has seen (``…:fence``), so a rebalancer that lost its lease while frozen
cannot raise a limit after its successor has read it. Until the first round a shard's
limit is 0 (nothing granted): a new quota opens with the first round, which comes after
the rebalancer lease's own restart fence (one timeout; ``declare_fresh()`` for a quota
that is provably new).

Metrics: per shard, the lease metrics of the shard's quota (``corevo_lease_held{quota=
"llm.s3-…"}``, ``corevo_lease_limit``, …); for the quota, ``corevo_lease_stranded_total``
(rejected while another shard had room, by this worker's last view of the shards) and
``corevo_lease_rebalanced_total`` (slots of limit moved).

Example::

    cluster = redis.cluster.RedisCluster(host="10.0.0.1", port=7000, socket_timeout=1,
                                         socket_connect_timeout=0.5)
    quota = ShardedLeaseStore("llm", cluster, limit=120, shards=6, timeout=30)
    quota.start_rebalancer()
    with quota.hold(key="tenant-42", wait=2) as lease:   # a Lease of one shard
        call_model(fence=lease.token)
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import random
import threading
import time
import zlib
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from time import monotonic
from typing import Any, Final

from prometheus_client import CollectorRegistry

from ..core.errors import ConfigError, LeaseRejected
from ..core.guard import absorb
from ..core.lifecycle import AsyncClosing, Closing
from ..core.telemetry import HasTelemetry, Telemetry
from ..observer import Observer
from .base import (
    DEFAULT_POLL,
    DEFAULT_TIMEOUT,
    AcquireResult,
    AsyncHold,
    AsyncLease,
    Counted,
    Hold,
    Lease,
    _LeaseCore,
    pauses,
)
from .breaker import CircuitBreaker, open_pause
from .provision import provision_command
from .redis_store import (
    CONNECT_TIMEOUT,
    KEY_PREFIX,
    NOW_LUA,
    SOCKET_TIMEOUT,
    WAIT_TIMEOUT,
    AsyncRedisLeaseStore,
    RedisLeaseStore,
    fence_lua,
)

SLOTS: Final = 16384
#: a spill skips a shard this worker saw full less than this long ago (seconds)
VIEW_TTL: Final = 0.05
#: '1' while a shard gets an admission's last chance (its rejection is a miss there); a
#: context variable, so concurrent tasks and threads each see their own
_LAST: contextvars.ContextVar[str] = contextvars.ContextVar("corevo_shard_last", default="0")

# KEYS: zset, limit, fence, misses, marker, run. ARGV: token, op (read | lower | raise),
# amount, timeout. Returns {limit, live holders, misses (read: taken and reset), amount
# applied, 1 while the shard is fenced}, or {-1, 0, 0, 0, 0} when a newer rebalancer has
# written here (this one is stale). The shard's restart fence runs here too, so a limit
# restored from a snapshot is never read as current (it goes back to 0, fence_lua).
LIMIT_LUA: Final = """
local fence = tonumber(redis.call('GET', KEYS[3]) or '0')
local token = tonumber(ARGV[1])
if token < fence then
  return {-1, 0, 0, 0, 0}
end
if token > fence then
  redis.call('SET', KEYS[3], ARGV[1])
end""" + NOW_LUA + fence_lua("KEYS[5]", "KEYS[6]", limit="KEYS[2]") + """
local fenced = 0
if now < mark + tonumber(ARGV[4]) then fenced = 1 end
local held = redis.call('ZCOUNT', KEYS[1], string.format('%.6f', now - tonumber(ARGV[4])),
                        '+inf')
local limit = tonumber(redis.call('GET', KEYS[2]) or '0')
local amount = tonumber(ARGV[3])
local misses = 0
if ARGV[2] == 'read' then
  misses = tonumber(redis.call('GETDEL', KEYS[4]) or '0')
elseif ARGV[2] == 'lower' then
  amount = math.max(0, math.min(amount, limit - held))
  limit = limit - amount
  redis.call('SET', KEYS[2], limit)
elseif ARGV[2] == 'raise' then
  limit = limit + amount
  redis.call('SET', KEYS[2], limit)
end
return {limit, held, misses, amount, fenced}
"""


@contextlib.contextmanager
def _last_chance(last: bool) -> Iterator[None]:
    """Mark the shard acquire inside as an admission's last chance (or not)."""
    mark = _LAST.set("1" if last else "0")
    try:
        yield
    finally:
        _LAST.reset(mark)


def key_slot(key: str) -> int:
    """The Cluster slot of ``key`` (redis-py's own CRC16 with hash tags)."""
    from redis.crc import key_slot as slot

    return int(slot(key.encode()))


def shard_names(quota: str, shards: int) -> list[str]:
    """Shard quota names ``<quota>.s<i>-<n>`` whose slots fall in K equal slot ranges.

    ``n`` is the first suffix that lands shard ``i`` in the i-th range; deterministic, so
    every worker computes the same names without asking the Cluster.
    """
    names = []
    for i in range(shards):
        lo, hi = i * SLOTS // shards, (i + 1) * SLOTS // shards
        n = 0
        while not lo <= key_slot(f"{KEY_PREFIX}{{{quota}.s{i}-{n}}}") < hi:
            n += 1
        names.append(f"{quota}.s{i}-{n}")
    return names


def home(key: str, shards: int) -> int:
    """The caller's shard: CRC32 of its key modulo K (stable across processes)."""
    return zlib.crc32(key.encode()) % shards


@dataclass
class ShardState:
    """One shard as the rebalancer read it."""

    limit: int
    held: int
    misses: int
    #: within its restart fence: holders it lost may still be at work
    fenced: bool = False

    @property
    def free(self) -> int:
        return max(0, self.limit - self.held)


def plan_lowers(states: list[ShardState]) -> list[tuple[int, int]]:
    """(shard, slots) to take: from shards with free slots and no misses, at most half
    of their free slots (rounded up), only while some shard had misses."""
    if not any(s.misses for s in states):
        return []
    want = sum(s.misses for s in states)
    out = []
    for i, s in sorted(enumerate(states), key=lambda e: -e[1].free):
        if want <= 0:
            break
        if s.misses == 0 and s.free > 0:
            give = min(want, (s.free + 1) // 2)
            out.append((i, give))
            want -= give
    return out


def plan_raises(states: list[ShardState], spare: int) -> list[tuple[int, int]]:
    """(shard, slots) to give ``spare`` slots to: shards with misses in proportion to
    them; with no misses anywhere, the shards with the lowest limits (the first round)."""
    out: dict[int, int] = {}
    needy = [(i, s.misses) for i, s in enumerate(states) if s.misses]
    limits = [s.limit for s in states]
    for _ in range(spare):
        if needy:
            i = max(needy, key=lambda e: e[1] / (1 + out.get(e[0], 0)))[0]
        else:
            i = min(range(len(limits)), key=lambda j: (limits[j], j))
        out[i] = out.get(i, 0) + 1
        limits[i] += 1
    return sorted(out.items())


#: one limit-script call of a rebalance round: (shard, op, amount, fencing token)
LimitOp = tuple[int, str, int, int]


class _ShardCore(HasTelemetry):
    """Configuration, names, the shard stores, admission order, the local view, the
    rebalance round and the metrics: all but the I/O, shared by both stores."""

    _shard_cls: type[Any]
    _rebalancer_cls: type[Any]

    def __init__(self, quota: str, client: Any, *, limit: int, shards: int,
                 spill: int | None = None, rebalance_every: float | None = None,
                 view_ttl: float = VIEW_TTL, socket_timeout: float = SOCKET_TIMEOUT,
                 connect_timeout: float = CONNECT_TIMEOUT, replicas: int = 0,
                 wait_timeout: float = WAIT_TIMEOUT, replica_fail_open: bool = False,
                 timeout: float = DEFAULT_TIMEOUT, heartbeat_interval: float | None = None,
                 margin: float | None = None, fail_open: bool = False,
                 breaker: CircuitBreaker | bool = True, observer: Observer | None = None,
                 worker: str | None = None, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= 64:
            raise ConfigError(f"shards must be an int in 1..64, got {shards!r}",
                              source="sharded lease store")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < shards:
            raise ConfigError(f"limit must be an int >= shards ({shards}), got {limit!r}",
                              source="sharded lease store")
        self.quota, self.limit, self.k = quota, limit, shards
        self.spill = shards if spill is None else max(1, min(shards, spill))
        self.view_ttl = float(view_ttl)
        self.timeout = float(timeout)
        self.rebalance_every = (self.timeout / 2 if rebalance_every is None
                                else float(rebalance_every))
        self.names = shard_names(quota, shards)
        self.client = client
        t = Telemetry.resolve(worker, registry)  # once: every shard reports the same
        # every shard store (and the rebalancer's) gets the same options
        store_options: dict[str, Any] = dict(
            socket_timeout=socket_timeout, connect_timeout=connect_timeout,
            replicas=replicas, wait_timeout=wait_timeout, replica_fail_open=replica_fail_open,
            timeout=timeout, heartbeat_interval=heartbeat_interval, margin=margin,
            fail_open=fail_open, breaker=breaker, observer=observer, worker=t.worker,
            registry=t.registry, clock=clock)
        self.shards: list[Any] = [self._shard_cls(n, client, limit=max(1, limit // shards),
                                                  **store_options) for n in self.names]
        self.rebalancer = self._rebalancer_cls(f"{quota}.rebalance", client, limit=1,
                                               **store_options)
        self._leader = self.rebalancer.new_holder()
        for member in [*self.shards, self.rebalancer]:   # a fence hint names this quota
            member.provision_command = provision_command(quota, shards)
        self._limit_script = client.register_script(LIMIT_LUA)
        self._telemetry = t  # the shards' own: every shard is built from it
        self._stranded = self._telemetry.child("corevo_lease_stranded_total", quota=quota)
        self._moved = self._telemetry.child("corevo_lease_rebalanced_total", quota=quota)
        self._stop = threading.Event()  # ends the blocking store's rebalancer thread

    def track(self) -> Mapping[str, Any]:
        """``LeaseStore.track`` over the shards: one view of every shard's live leases."""
        live: Mapping[str, Any] = self.shards[0].track()
        for s in self.shards[1:]:
            s._live = live
        return live

    def order(self, key: str | None) -> list[int]:
        """The candidate shards for ``key``: its home shard first, then the next ones (no
        key: a random home shard, for callers that need no affinity)."""
        h = home(key, self.k) if key is not None else random.randrange(self.k)  # noqa: S311
        return [(h + j) % self.k for j in range(self.spill)]

    def pick(self, candidates: list[int], tried: list[int]) -> tuple[int, bool] | None:
        """The next shard to try and whether it is the admission's last chance (no other
        candidate left that was not seen full), or None: reject. See "Admission" in the
        module doc."""
        now, ttl, shards = monotonic(), self.view_ttl, self.shards
        left = [i for i in candidates if i not in tried and not shards[i].surely_full(ttl, now)]
        if not left:  # all seen full: the server confirms it once, on the stalest view
            return None if tried else (min(candidates, key=lambda j: shards[j].seen_at), True)
        if not tried and left[0] == candidates[0]:
            return candidates[0], len(left) == 1
        best = max(left, key=lambda j: (shards[j].seen[1] - shards[j].seen[0],
                                        -shards[j].seen_at))
        return best, len(left) == 1

    def view(self) -> list[tuple[int, int]]:
        """(held, limit) per shard as last seen by this worker (acquire replies and
        rebalancer reads)."""
        return [s.seen for s in self.shards]

    def crowded(self, reserve: int) -> bool:
        """Fewer than ``reserve`` free slots over all shards as this worker last saw
        them: a ``LeaseBuffer`` then gives returned leases back instead of keeping them
        (kept, they would strand slots that other workers are being refused)."""
        return sum(max(0, limit - held) for held, limit in self.view()) < reserve

    def _rejected_all(self, tried: list[int]) -> int:
        """Count a stranded rejection when a shard not asked had room as last seen; the
        shard tried last (whose outcome the rejection names)."""
        for i in set(range(self.k)) - set(tried):
            held, limit = self.shards[i].seen
            if held < limit:
                self._stranded.inc()
                break
        return tried[-1]

    def _states(self, replies: list[Any]) -> list[ShardState] | None:
        if any(int(r[0]) < 0 for r in replies):
            return None  # a newer rebalancer wrote on some shard: this one is stale
        states = [ShardState(int(r[0]), int(r[1]), int(r[2]), bool(r[4])) for r in replies]
        for shard, st in zip(self.shards, states, strict=True):
            shard._saw(st.held, st.limit)
        return states

    def _round(self) -> Generator[LimitOp | None, Any, int | None]:
        """One rebalance round as the calls it needs, each sent back its reply (None: the
        rebalancer lease; else a limit-script call), so the sync and asyncio stores only
        do the I/O. Slots moved, or None (not the leader, or stale)."""
        lease = yield None
        if lease is None:
            return None
        token = lease.token
        replies = []
        for i in range(self.k):
            replies.append((yield i, "read", 0, token))
        states = self._states(replies)
        if states is None:
            return None
        taken = 0
        for i, amount in plan_lowers(states):
            reply = yield i, "lower", amount, token
            if int(reply[0]) < 0 or not lease.valid():
                return None
            taken += int(reply[3])
            states[i].limit = int(reply[0])
            self.shards[i]._saw(int(reply[1]), int(reply[0]))
        if any(s.fenced for s in states):
            # a shard that lost grants (restart, failover) cannot say how many of its
            # slots are still worked on until its fence ends: nothing is raised till then
            if taken:
                self._moved.inc(taken)
            return taken
        # a shard restored with live holders over its (reset) limit keeps their slots
        spare = self.limit - sum(max(s.limit, s.held) for s in states)
        for i, amount in plan_raises(states, spare):
            reply = yield i, "raise", amount, token
            if int(reply[0]) < 0 or not lease.valid():
                return None
            self.shards[i]._saw(int(reply[1]), int(reply[0]))
        if taken:
            self._moved.inc(taken)
        return taken

    def _pause(self, started: float, wait: float, poll: float) -> float | None:
        """``LeaseStore._pause`` over the shards: the breaker rule applies when every
        shard's backend is known down."""
        if all(s._breaker_open() for s in self.shards):
            after = min(s.breaker.retry_after() for s in self.shards)
            return open_pause(self.quota, after, started, wait)
        first: _LeaseCore = self.shards[0]  # a shard store, of either flavour
        return first._rejected(started, wait, poll)

    def _call(self, op: LimitOp | None) -> Any:
        """Send one call of ``_round`` (a coroutine on the asyncio store)."""
        if op is None:
            return self.rebalancer.acquire(holder=self._leader)
        i, what, amount, token = op
        s = self.shards[i]
        return self._limit_script(keys=[s.key, s.limit_key, f"{s.key}:fence", s.misses_key,
                                        s.marker_key, s.run_key],
                                  args=[token, what, amount, self.timeout])


class _SeenShard:
    """This worker's last view of one shard: (held, limit) and when it was seen."""

    #: (held, limit) from the last reply: the sharded store's view of this shard
    seen: tuple[int, int] = (0, 0)
    seen_at = float("-inf")

    def _saw(self, held: int, limit: int) -> None:
        self.seen, self.seen_at = (held, limit), monotonic()

    def _released_one(self) -> None:
        held, limit = self.seen
        self.seen = (max(0, held - 1), limit)

    def surely_full(self, ttl: float, now: float | None = None) -> bool:
        """Seen full less than ``ttl`` s ago: a spill skips it (no round trip)."""
        held, limit = self.seen
        return held >= limit and (monotonic() if now is None else now) - self.seen_at < ttl


class _Shard(_SeenShard, RedisLeaseStore):
    """One shard: its limit and misses live in Redis (``limit_key``); a missing limit is
    0 (nothing granted before the rebalancer's first round)."""

    _limit_key = True

    def _try_acquire(self, holder: str) -> AcquireResult:
        granted, reaped, held, token, limit = self._acquire_script(
            keys=self.keys, args=[self.timeout, 0, holder, _LAST.get()])
        self.limit = limit  # what the lease metrics report
        if granted == 1 and self.replicas and self._taken_back(holder):
            held -= 1
            granted = 0
        self._saw(held, limit)
        return AcquireResult(granted == 1, reaped, held, token, granted == 2)

    def _remove(self, holder: str) -> Counted:
        removed = super()._remove(holder)
        if removed:
            self._released_one()
        return removed


class _AsyncShard(_SeenShard, AsyncRedisLeaseStore):
    _limit_key = True

    async def _try_acquire(self, holder: str) -> AcquireResult:
        granted, reaped, held, token, limit = await self._acquire_script(
            keys=self.keys, args=[self.timeout, 0, holder, _LAST.get()])
        self.limit = limit
        if granted == 1 and self.replicas and await self._taken_back(holder):
            held -= 1
            granted = 0
        self._saw(held, limit)
        return AcquireResult(granted == 1, reaped, held, token, granted == 2)

    async def _remove(self, holder: str) -> Counted:
        removed = await super()._remove(holder)
        if removed:
            self._released_one()
        return removed


class ShardedLeaseStore(_ShardCore, Closing):
    """A sharded quota on a blocking client (``RedisCluster`` or plain ``Redis``).

    ``client`` is shared by the shards; ``worker`` / ``registry`` and the store options
    (``timeout``, ``heartbeat_interval``, ``margin``, ``socket_timeout``, ``breaker``, …:
    those of ``RedisLeaseStore``) go to every shard store (``breaker=True``: one default
    breaker per shard). ``spill`` bounds the shards one admission tries (default:
    all), ``view_ttl`` how long a shard seen full is skipped (0: never). The handle
    returned is the shard's own ``Lease``: heartbeat and release go to that shard.
    """

    _shard_cls, _rebalancer_cls = _Shard, RedisLeaseStore
    _thread: threading.Thread | None = None

    def _admit(self, key: str | None, holder: str | None) -> tuple[Lease | None, int]:
        """A lease or None, and the shard tried last (whose outcome a rejection names)."""
        candidates, tried = self.order(key), list[int]()
        while (chosen := self.pick(candidates, tried)) is not None:
            i, last = chosen
            with _last_chance(last):
                lease = self.shards[i].acquire(holder=holder)
            if lease is not None:
                return lease, i
            tried.append(i)
        return None, self._rejected_all(tried)

    def acquire(self, *, key: str | None = None, wait: float = 0.0,
                holder: str | None = None, poll: float = DEFAULT_POLL) -> Lease | None:
        """A lease on a shard of ``key``'s candidates with room, or None when none came
        within ``wait`` s (see ``LeaseStore.acquire``)."""
        if wait <= 0:
            return self._admit(key, holder)[0]
        try:
            return self._obtain(wait, holder, poll, key)
        except LeaseRejected:
            return None

    def _obtain(self, wait: float, holder: str | None, poll: float,
                key: str | None = None) -> Lease:
        """See ``LeaseStore._obtain``; ``BreakerOpen`` when every shard's backend is known
        down (``_pause``)."""
        holder = holder or self.shards[0].new_holder()
        last = 0  # the shard tried last: its outcome names a rejection
        waits = pauses(self, wait, poll, lambda: self.shards[last]._last_outcome)
        while True:
            lease, last = self._admit(key, holder)
            if lease is not None:
                return lease
            time.sleep(next(waits))

    def hold(self, *, key: str | None = None, wait: float = 0.0, holder: str | None = None,
             poll: float = DEFAULT_POLL) -> Hold:
        """``with quota.hold(key="tenant", wait=2) as lease:`` — ``LeaseStore.hold`` on the
        shards."""
        return Hold(lambda: self._obtain(wait, holder, poll, key))

    def rebalance(self) -> int | None:
        """One round if this worker holds the rebalancer lease: slots moved, else None."""
        calls, reply = self._round(), None
        try:
            while True:
                reply = self._call(calls.send(reply))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def start_rebalancer(self) -> threading.Thread:
        """Run ``rebalance()`` every ``rebalance_every`` s in a daemon thread (every
        worker may run one; only the lease holder acts)."""
        def loop() -> None:
            while True:
                try:
                    self.rebalance()
                except Exception as exc:  # noqa: BLE001 - the next round retries
                    absorb("lease-rebalance", exc, telemetry=self._telemetry)
                if self._stop.wait(self.rebalance_every):
                    return

        if self._thread is None:
            self._thread = threading.Thread(target=loop, daemon=True,
                                            name=f"corevo-rebalance-{self.quota}")
            self._thread.start()
        return self._thread

    def declare_fresh(self) -> None:
        """Every shard and the rebalancer lease are new (see ``LeaseStore.declare_fresh``)."""
        for s in [*self.shards, self.rebalancer]:
            s.declare_fresh()

    def provision(self) -> bool:
        """Provision every shard and the rebalancer lease (see ``LeaseStore.provision``)."""
        return any([s.provision() for s in [*self.shards, self.rebalancer]])

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        for s in [*self.shards, self.rebalancer]:
            s.close()


class AsyncShardedLeaseStore(_ShardCore, AsyncClosing):
    """The sharded quota on an asyncio client (``redis.asyncio.cluster.RedisCluster`` or
    ``redis.asyncio.Redis``); the same options, coroutines for I/O."""

    _shard_cls, _rebalancer_cls = _AsyncShard, AsyncRedisLeaseStore
    _task: asyncio.Task[None] | None = None

    async def _admit(self, key: str | None,
                     holder: str | None) -> tuple[AsyncLease | None, int]:
        candidates, tried = self.order(key), list[int]()
        while (chosen := self.pick(candidates, tried)) is not None:
            i, last = chosen
            with _last_chance(last):
                lease = await self.shards[i].acquire(holder=holder)
            if lease is not None:
                return lease, i
            tried.append(i)
        return None, self._rejected_all(tried)

    async def acquire(self, *, key: str | None = None, wait: float = 0.0,
                      holder: str | None = None,
                      poll: float = DEFAULT_POLL) -> AsyncLease | None:
        """See ``ShardedLeaseStore.acquire``."""
        if wait <= 0:
            return (await self._admit(key, holder))[0]
        try:
            return await self._obtain(wait, holder, poll, key)
        except LeaseRejected:
            return None

    async def _obtain(self, wait: float, holder: str | None, poll: float,
                      key: str | None = None) -> AsyncLease:
        holder = holder or self.shards[0].new_holder()
        last = 0  # the shard tried last: its outcome names a rejection
        waits = pauses(self, wait, poll, lambda: self.shards[last]._last_outcome)
        while True:
            lease, last = await self._admit(key, holder)
            if lease is not None:
                return lease
            await asyncio.sleep(next(waits))

    def hold(self, *, key: str | None = None, wait: float = 0.0, holder: str | None = None,
             poll: float = DEFAULT_POLL) -> AsyncHold:
        """See ``ShardedLeaseStore.hold``; the body is cancelled when the lease is lost."""
        return AsyncHold(lambda: self._obtain(wait, holder, poll, key))

    async def rebalance(self) -> int | None:
        calls, reply = self._round(), None
        try:
            while True:
                reply = await self._call(calls.send(reply))
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]

    def start_rebalancer(self) -> asyncio.Task[None]:
        async def loop() -> None:
            while True:
                try:
                    await self.rebalance()
                except Exception as exc:  # noqa: BLE001
                    absorb("lease-rebalance", exc, telemetry=self._telemetry)
                await asyncio.sleep(self.rebalance_every)

        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(loop())
        return self._task

    async def _declare_fresh(self) -> None:
        for s in [*self.shards, self.rebalancer]:
            await s.declare_fresh()

    async def _provision(self) -> bool:
        made = [await s.provision() for s in [*self.shards, self.rebalancer]]
        return any(made)

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        for s in [*self.shards, self.rebalancer]:
            await s.aclose()


