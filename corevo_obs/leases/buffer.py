"""A per-worker buffer of pre-leased slots: admissions without a round trip.

With several workers on a sharded quota, each admission costs at least one round trip,
and the stale views that spare round trips strand slots (docs/leases-claims.md). A
``LeaseBuffer`` keeps up to ``size`` leases that this worker's finished work gave back,
so the next admission takes one at once. Every buffered slot stays a named lease of the
store, renewed by its own keep-alive under the same rules as any held lease, so a worker
that dies loses its buffered slots after one lease timeout like any other holder.
Sharding plus a buffer never brings back an anonymous counter.

Rules:

- an admission takes the newest buffered lease that is still surely held (``valid()``,
  its keep-alive running); else it asks the store (and starts the lease's keep-alive);
- a returned lease is kept when the buffer is below ``size``, some admission came within
  ``idle`` seconds (recent demand), the lease is surely held, and the store does not say
  the quota is crowded (``ShardedLeaseStore.crowded``: fewer than ``reserve`` free slots
  as this worker last saw the shards; default ``max(size, limit // 4)``); else it is
  released to the store. Near its limit a quota needs its slots where the demand is, not
  in a buffer, so the buffer empties itself there;
- a buffered lease unused for ``idle`` seconds is released (a sweeper thread or task,
  started at the first kept lease), and so is the whole buffer once the quota is crowded;
- a lease is handed to one holder at a time: taking and keeping run under one lock, and
  a second return of the same lease changes nothing.

The cost, by design: a buffered slot is held and unused, so up to ``size`` slots per
worker are unavailable to other workers for up to ``idle`` seconds (stranded capacity,
exported as ``corevo_lease_buffered`` and counted by bench/shard_bench.py). A handed-out
lease keeps the fencing token of its grant: tokens are not monotonic across handouts, so
side effects fenced by "largest token seen" need leases from the store itself.

Example::

    quota = ShardedLeaseStore("llm", cluster, limit=120, shards=6, timeout=30)
    buffer = LeaseBuffer(quota, size=4, idle=1.0)
    with buffer.hold(key="tenant-42", wait=2) as lease:   # a shard's Lease, kept alive
        call_model()
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from time import monotonic
from typing import Any, Final

from ..core.errors import ConfigError
from ..core.guard import absorb
from ..core.lifecycle import AsyncClosing, Closing
from ..core.telemetry import HasTelemetry, Telemetry
from .base import DEFAULT_POLL, AsyncHold, AsyncLease, Hold, Lease, _number

#: seconds a buffered lease may stay unused, and how recent demand must be to keep one
DEFAULT_IDLE: Final = 1.0
OUTCOMES: Final = ("hit", "kept", "released", "idle", "lost")
#: default ``reserve``: a quarter of the limit (measured: an eighth still stranded 9 % of
#: the rejections of 4 workers at the limit, a quarter none; bench/shard_bench.py)
RESERVE_SHARE: Final = 4


def _kept_alive(lease: Any) -> bool:
    """Surely held and renewed: valid, not degraded, its keep-alive still running (a
    lease released behind the buffer's back has none, though it is still ``valid()``)."""
    keeper = lease._keeper
    if keeper is None or lease.degraded or not lease.valid():
        return False
    return keeper.is_alive() if isinstance(keeper, threading.Thread) else not keeper.done()


class _BufferCore(HasTelemetry):
    """The bookkeeping of both buffers (no I/O): what is kept, what is out, the metrics."""

    def __init__(self, store: Any, *, size: int, idle: float = DEFAULT_IDLE,
                 reserve: int | None = None,
                 crowded: Callable[[int], bool] | None = None) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= 1024:
            raise ConfigError(f"size must be an int in 1..1024, got {size!r}",
                              source="lease buffer")
        self.idle = _number(idle, "idle")
        if self.idle >= store.timeout:
            raise ConfigError(f"idle {self.idle:.3g}s must be below the lease timeout "
                              f"{store.timeout:.3g}s", source="lease buffer")
        self.store, self.size, self.quota = store, size, store.quota
        if reserve is None:
            reserve = max(size, int(store.limit) // RESERVE_SHARE)
        if isinstance(reserve, bool) or not isinstance(reserve, int) or reserve < 0:
            raise ConfigError(f"reserve must be an int >= 0, got {reserve!r}",
                              source="lease buffer")
        #: free slots (as last seen) below which the quota counts as crowded
        self.reserve = reserve
        self._crowded = crowded if crowded is not None else getattr(store, "crowded", None)
        self._free: list[tuple[Any, float]] = []  # (lease, kept at), the newest last
        self._out: set[Any] = set()  # handed out by this buffer and not yet returned
        self._lock = threading.RLock()  # a lease lost inside valid() calls _dropped
        self._demand_at = float("-inf")
        # the store's worker label and registry (a sharded store's are its shards')
        self._telemetry = Telemetry(store.worker, store.registry)
        self._gauge = self._telemetry.child("corevo_lease_buffered", quota=self.quota)
        self._count = {o: self._telemetry.child("corevo_lease_buffer_total", quota=self.quota,
                                                outcome=o) for o in OUTCOMES}

    @property
    def buffered(self) -> int:
        """Leases held for this worker and unused right now."""
        return len(self._free)

    def _take(self) -> tuple[Any, list[Any]]:
        """The newest buffered lease still surely held (or None), and the ones found
        not to be (to release)."""
        stale: list[Any] = []
        with self._lock:
            self._demand_at = monotonic()
            while self._free:
                lease, _ = self._free.pop()
                if _kept_alive(lease):
                    self._out.add(lease)
                    self._count["hit"].inc()
                    self._gauge.set(len(self._free))
                    return lease, stale
                stale.append(lease)
            self._gauge.set(0)
        self._count["lost"].inc(len(stale))
        return None, stale

    def _handed(self, lease: Any) -> None:
        with self._lock:
            self._out.add(lease)

    def _keep(self, lease: Any) -> bool | None:
        """Keep a returned lease (True), or say to release it (False); None when this
        buffer does not have it out (a second return, or a lease it never handed)."""
        now = monotonic()
        with self._lock:
            if lease not in self._out:
                return None
            self._out.discard(lease)
            if (len(self._free) < self.size and now - self._demand_at < self.idle
                    and _kept_alive(lease) and not self._is_crowded()):
                lease._on_lost = None  # the finished holds' callbacks go (no leak)
                lease.add_lost_callback(self._dropped)
                self._free.append((lease, now))
                self._gauge.set(len(self._free))
                self._count["kept"].inc()
                return True
        self._count["released"].inc()
        return False

    def _returned(self, lease: Any) -> bool | None:
        """A lease given back: True kept, False nothing to do (a second return of a kept
        one), None release it to the store."""
        kept = self._keep(lease)
        if kept:
            self._start_sweeper()
            return True
        with self._lock:
            if kept is None and any(k is lease for k, _ in self._free):
                return False
        return None

    def _start_sweeper(self) -> None:
        raise NotImplementedError

    def _is_crowded(self) -> bool:
        if self._crowded is None:
            return False
        try:
            return bool(self._crowded(self.reserve))
        except Exception as exc:  # noqa: BLE001 - a broken hook must not stop releases
            absorb("lease-buffer", exc, telemetry=self._telemetry)
            return True

    def _dropped(self, lease: Any) -> None:
        """A buffered lease was lost (its keep-alive said so): it leaves the buffer."""
        with self._lock:
            before = len(self._free)
            self._free = [(k, t) for k, t in self._free if k is not lease]
            gone = before - len(self._free)
            self._gauge.set(len(self._free))
        if gone:
            self._count["lost"].inc()

    def _expired(self, everything: bool = False) -> list[Any]:
        """Buffered leases unused for ``idle`` s (all of them when crowded or
        ``everything``), taken out of the buffer: the caller releases them."""
        crowded = everything or (bool(self._free) and self._is_crowded())
        cut = monotonic() - self.idle
        with self._lock:
            out = [k for k, t in self._free if crowded or t <= cut]
            self._free = [(k, t) for k, t in self._free if not (crowded or t <= cut)]
            self._gauge.set(len(self._free))
        if not everything:
            self._count["released" if crowded else "idle"].inc(len(out))
        return out

    def _key(self, key: str | None) -> dict[str, Any]:
        """The caller key goes to a sharded store only (a plain store has no shards)."""
        return {} if key is None else {"key": key}


class LeaseBuffer(_BufferCore, Closing):
    """The buffer on a blocking store (``ShardedLeaseStore`` or any ``LeaseStore``).

    Handles are the store's own ``Lease``; give them back with ``release(lease)`` (or use
    ``hold()``): ``lease.release()`` would release to the store behind the buffer (safe:
    the buffer then never keeps it). ``holder=`` names fresh grants only.
    """

    _sweeper: threading.Thread | None = None

    def __init__(self, store: Any, *, size: int, idle: float = DEFAULT_IDLE,
                 reserve: int | None = None,
                 crowded: Callable[[int], bool] | None = None) -> None:
        super().__init__(store, size=size, idle=idle, reserve=reserve, crowded=crowded)
        self._stop = threading.Event()

    def _fresh(self, lease: Lease | None) -> Lease | None:
        if lease is not None:
            lease.keep_alive()
            self._handed(lease)
        return lease

    def _from_buffer(self) -> Lease | None:
        lease, stale = self._take()
        for old in stale:
            old.release()
        return lease  # type: ignore[no-any-return]

    def acquire(self, *, key: str | None = None, wait: float = 0.0,
                holder: str | None = None, poll: float = DEFAULT_POLL) -> Lease | None:
        """A buffered lease at once, else the store's ``acquire`` (None: none came within
        ``wait`` s), kept alive either way."""
        found = self._from_buffer()
        if found is not None:
            return found
        return self._fresh(self.store.acquire(wait=wait, holder=holder, poll=poll,
                                              **self._key(key)))

    def _obtain(self, wait: float, key: str | None, holder: str | None, poll: float) -> Lease:
        """``acquire``, or ``LeaseRejected`` (what ``hold()`` enters with)."""
        found = self._from_buffer()
        if found is not None:
            return found
        lease = self.store._obtain(wait, holder=holder, poll=poll, **self._key(key))
        self._fresh(lease)
        return lease  # type: ignore[no-any-return]

    def release(self, lease: Lease) -> bool:
        """Keep ``lease`` for the next admission or release it to the store; True when
        kept or removed. A second return of a kept lease changes nothing (False)."""
        done = self._returned(lease)
        return lease.release() if done is None else done

    def hold(self, *, key: str | None = None, wait: float = 0.0, holder: str | None = None,
             poll: float = DEFAULT_POLL) -> Hold:
        """``with buffer.hold(key="tenant") as lease:`` — ``LeaseStore.hold`` through the
        buffer: the lease goes back to it at the end of the block."""
        return _BufferHold(self, lambda: self._obtain(wait, key, holder, poll))

    def sweep(self) -> int:
        """Release the buffered leases past the idle bound (all when crowded); how many."""
        expired = self._expired()
        for lease in expired:
            lease.release()
        return len(expired)

    def _start_sweeper(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.idle / 2):
                try:
                    self.sweep()
                except Exception as exc:  # noqa: BLE001 - the next round retries
                    absorb("lease-buffer", exc, telemetry=self._telemetry)

        if self._sweeper is None and not self._stop.is_set():
            self._sweeper = threading.Thread(target=loop, daemon=True,
                                             name=f"corevo-buffer-{self.quota}")
            self._sweeper.start()

    def close(self) -> None:
        """Stop the sweeper and release every buffered lease (leases out stay out)."""
        self._stop.set()
        if self._sweeper is not None:
            self._sweeper.join(5)
        for lease in self._expired(everything=True):
            lease.release()


class AsyncLeaseBuffer(_BufferCore, AsyncClosing):
    """The buffer on an asyncio store (``AsyncShardedLeaseStore`` or any
    ``AsyncLeaseStore``); the same rules, coroutines for I/O, the sweeper a task."""

    _sweeper: asyncio.Task[None] | None = None

    def _fresh(self, lease: AsyncLease | None) -> AsyncLease | None:
        if lease is not None:
            lease.keep_alive()
            self._handed(lease)
        return lease

    async def _from_buffer(self) -> AsyncLease | None:
        lease, stale = self._take()
        for old in stale:
            await old.release()
        return lease  # type: ignore[no-any-return]

    async def acquire(self, *, key: str | None = None, wait: float = 0.0,
                      holder: str | None = None,
                      poll: float = DEFAULT_POLL) -> AsyncLease | None:
        """See ``LeaseBuffer.acquire``."""
        found = await self._from_buffer()
        if found is not None:
            return found
        return self._fresh(await self.store.acquire(wait=wait, holder=holder, poll=poll,
                                                    **self._key(key)))

    async def _obtain(self, wait: float, key: str | None, holder: str | None,
                      poll: float) -> AsyncLease:
        found = await self._from_buffer()
        if found is not None:
            return found
        lease = await self.store._obtain(wait, holder=holder, poll=poll, **self._key(key))
        self._fresh(lease)
        return lease  # type: ignore[no-any-return]

    async def release(self, lease: AsyncLease) -> bool:
        done = self._returned(lease)
        return await lease.release() if done is None else done

    def hold(self, *, key: str | None = None, wait: float = 0.0, holder: str | None = None,
             poll: float = DEFAULT_POLL) -> AsyncHold:
        """``async with buffer.hold(key="tenant") as lease:`` — the body is cancelled when
        the lease is lost, and the lease goes back to the buffer at the end."""
        return _AsyncBufferHold(self, lambda: self._obtain(wait, key, holder, poll))

    async def sweep(self) -> int:
        expired = self._expired()
        for lease in expired:
            await lease.release()
        return len(expired)

    def _start_sweeper(self) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(self.idle / 2)
                try:
                    await self.sweep()
                except Exception as exc:  # noqa: BLE001
                    absorb("lease-buffer", exc, telemetry=self._telemetry)

        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.get_running_loop().create_task(loop())

    async def aclose(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for lease in self._expired(everything=True):
            await lease.release()


class _BufferHold(Hold):
    def __init__(self, buffer: LeaseBuffer, obtain: Callable[[], Lease]) -> None:
        super().__init__(obtain)
        self.buffer = buffer

    def _give_back(self, lease: Lease) -> None:
        self.buffer.release(lease)


class _AsyncBufferHold(AsyncHold):
    def __init__(self, buffer: AsyncLeaseBuffer,
                 obtain: Callable[[], Awaitable[AsyncLease]]) -> None:
        super().__init__(obtain)
        self.buffer = buffer

    async def _give_back(self, lease: AsyncLease) -> None:
        await self.buffer.release(lease)
