"""Named leases on a global quota: the store interface and the handle a holder keeps.

A backend implements four primitives with the article's semantics — ``_try_acquire``
(reap members whose heartbeat is older than the timeout, count, add: one atomic step),
``_renew`` (refresh only a member still present), ``_remove`` (idempotent) and
``holders`` — and inherits everything else from here: holder ids, timing, the observer
calls and the failure policy. So Redis and SQLite report through one code path.

Failure policy: a backend error never reaches the host as an exception. By default the
store fails closed (acquire rejects, heartbeat says "not held"), counts the error and
logs once; ``fail_open=True`` grants a *degraded* lease that the backend never saw.

Example::

    store = RedisLeaseStore("llm", url, limit=10, timeout=30)
    lease = store.acquire()
    if lease is None:
        raise Overloaded()
    with lease:                      # release on exit, idempotent
        ...
        if not lease.heartbeat():    # every few seconds; False: judged dead, stop
            raise LeaseLost()
"""

from __future__ import annotations

import asyncio
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from time import monotonic
from types import TracebackType
from typing import Final, NamedTuple

from prometheus_client import CollectorRegistry

from ..errors import ConfigError
from ..guard import absorb
from ..identity import worker_name
from ..observer import MetricsObserver, Observer
from .holder import HolderIds

DEFAULT_TIMEOUT: Final = 30.0
_QUOTA = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


class AcquireResult(NamedTuple):
    """What one atomic acquire saw: granted or not, ghosts reaped, holders after it."""

    granted: bool
    reaped: int
    held: int


class _LeaseCore:
    """Validation, instrumentation and failure policy shared by sync and async stores."""

    def __init__(
        self,
        quota: str,
        *,
        limit: int,
        timeout: float = DEFAULT_TIMEOUT,
        worker: str | None = None,
        observer: Observer | None = None,
        registry: CollectorRegistry | None = None,
        fail_open: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not _QUOTA.match(quota):
            raise ConfigError(f"quota name {quota!r} must be 1-64 of [A-Za-z0-9_.:-]",
                              source="lease store")
        if limit < 1:
            raise ConfigError(f"limit must be >= 1, got {limit}", source="lease store")
        if timeout <= 0:
            raise ConfigError(f"timeout must be > 0, got {timeout}", source="lease store")
        self.quota = quota
        self.limit = int(limit)
        self.timeout = float(timeout)
        self.worker = worker_name(worker)
        self.observer = observer or MetricsObserver(worker=self.worker, registry=registry)
        self.fail_open = fail_open
        self.clock = clock
        self._registry = registry
        self._ids = HolderIds(self.worker)

    def new_holder(self) -> str:
        """A fresh holder id naming this worker and process (see ``holder.py``)."""
        return self._ids.new()

    def _acquired(self, res: AcquireResult, t0: float) -> float | None:
        """Report one acquire; the grant time (a ``monotonic()`` reading) or None.

        One clock reading serves as both the end of the acquire latency and the handle's
        ``granted_at``: on the hot path every call counts (see bench/lease_bench.py).
        """
        t1 = monotonic()
        self.observer.lease_acquired(
            self.quota, "granted" if res.granted else "rejected", reaped=res.reaped,
            held=res.held, limit=self.limit, seconds=t1 - t0,
        )
        return t1 if res.granted else None

    def _failed(self, what: str, exc: BaseException) -> bool:
        """Absorb a backend error; the return value is the fail-open/closed decision."""
        absorb(f"lease-{what}", exc, worker=self.worker, registry=self._registry)
        return self.fail_open

    def _acquire_failed(self, exc: BaseException, t0: float) -> bool:
        self.observer.lease_acquired(self.quota, "error", limit=self.limit,
                                     seconds=monotonic() - t0)
        return self._failed("acquire", exc)

    def _heartbeat_done(self, renewed: bool) -> bool:
        self.observer.lease_heartbeat(self.quota, "renewed" if renewed else "lost")
        return renewed

    def _heartbeat_failed(self, exc: BaseException) -> bool:
        self.observer.lease_heartbeat(self.quota, "error")
        return self._failed("heartbeat", exc)

    def _released(self, removed: bool, granted_at: float | None) -> bool:
        if not removed:
            self.observer.lease_released(self.quota, "noop")
        else:
            self.observer.lease_released(
                self.quota, "released", None if granted_at is None else monotonic() - granted_at)
        return removed

    def _release_failed(self, exc: BaseException) -> bool:
        self.observer.lease_released(self.quota, "error")
        self._failed("release", exc)
        return False


class LeaseStore(_LeaseCore, ABC):
    """A blocking lease store; every call is one short round trip or transaction."""

    @abstractmethod
    def _try_acquire(self, holder: str, now: float) -> AcquireResult: ...

    @abstractmethod
    def _renew(self, holder: str, now: float) -> bool: ...

    @abstractmethod
    def _remove(self, holder: str) -> bool: ...

    @abstractmethod
    def holders(self) -> list[tuple[str, float]]:
        """Every member and its last heartbeat (unix seconds), ghosts included."""

    def close(self) -> None:
        """Release backend resources (not the leases)."""

    def acquire(self, holder: str | None = None) -> Lease | None:
        """A lease, or None when the quota is full (or the backend failed, fail-closed).

        Retrying with the same ``holder`` never takes a second slot: it refreshes.
        """
        holder = holder or self._ids.new()
        t0 = monotonic()
        try:
            granted_at = self._acquired(self._try_acquire(holder, self.clock()), t0)
        except Exception as exc:  # noqa: BLE001 - backend failure becomes a policy decision
            return Lease(self, holder, monotonic(), True) if self._acquire_failed(exc, t0) else None
        return None if granted_at is None else Lease(self, holder, granted_at)

    def heartbeat(self, holder: str) -> bool:
        try:
            return self._heartbeat_done(self._renew(holder, self.clock()))
        except Exception as exc:  # noqa: BLE001
            return self._heartbeat_failed(exc)

    def release(self, holder: str, granted_at: float | None = None) -> bool:
        try:
            return self._released(self._remove(holder), granted_at)
        except Exception as exc:  # noqa: BLE001
            return self._release_failed(exc)


class AsyncLeaseStore(_LeaseCore, ABC):
    """The same store for asyncio: primitives are coroutines."""

    @abstractmethod
    async def _try_acquire(self, holder: str, now: float) -> AcquireResult: ...

    @abstractmethod
    async def _renew(self, holder: str, now: float) -> bool: ...

    @abstractmethod
    async def _remove(self, holder: str) -> bool: ...

    @abstractmethod
    async def holders(self) -> list[tuple[str, float]]: ...

    async def close(self) -> None:
        """Release backend resources (not the leases)."""

    async def acquire(self, holder: str | None = None) -> AsyncLease | None:
        holder = holder or self._ids.new()
        t0 = monotonic()
        try:
            granted_at = self._acquired(await self._try_acquire(holder, self.clock()), t0)
        except Exception as exc:  # noqa: BLE001
            if self._acquire_failed(exc, t0):
                return AsyncLease(self, holder, monotonic(), True)
            return None
        return None if granted_at is None else AsyncLease(self, holder, granted_at)

    async def heartbeat(self, holder: str) -> bool:
        try:
            return self._heartbeat_done(await self._renew(holder, self.clock()))
        except Exception as exc:  # noqa: BLE001
            return self._heartbeat_failed(exc)

    async def release(self, holder: str, granted_at: float | None = None) -> bool:
        try:
            return self._released(await self._remove(holder), granted_at)
        except Exception as exc:  # noqa: BLE001
            return self._release_failed(exc)


class _LeaseHandle:
    """State common to both handles: who holds, since when, and whether it is real."""

    __slots__ = ("store", "holder", "quota", "granted_at", "degraded", "lost", "__weakref__")

    def __init__(self, store: _LeaseCore, holder: str, granted_at: float,
                 degraded: bool = False) -> None:
        self.store = store
        self.holder = holder
        self.quota = store.quota
        #: ``time.monotonic()`` when the store granted it
        self.granted_at = granted_at
        #: granted fail-open while the backend was down: the backend never saw it
        self.degraded = degraded
        #: set once a heartbeat learned the lease had been reaped
        self.lost = False

    def __repr__(self) -> str:
        flags = " degraded" if self.degraded else ""
        return f"<{type(self).__name__} {self.quota} {self.holder}{flags}>"


class Lease(_LeaseHandle):
    """A granted slot. ``heartbeat()`` renews it; ``release()`` is safe to call twice
    (the second call is counted as a ``noop`` release, which is what exposes the path).
    """

    __slots__ = ()
    store: LeaseStore

    def heartbeat(self) -> bool:
        """Renew; False means the lease is gone (reaped, or the backend is down)."""
        if self.degraded:
            return True
        held = self.store.heartbeat(self.holder)
        self.lost = self.lost or not held
        return held

    def release(self) -> bool:
        """Give the slot back; True if this call removed it."""
        if self.degraded:
            return False
        return self.store.release(self.holder, self.granted_at)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


class AsyncLease(_LeaseHandle):
    """The asyncio handle; ``keep_alive`` runs the heartbeat in a background task."""

    __slots__ = ("_keeper",)
    store: AsyncLeaseStore

    def __init__(self, store: AsyncLeaseStore, holder: str, granted_at: float,
                 degraded: bool = False) -> None:
        super().__init__(store, holder, granted_at, degraded)
        self._keeper: asyncio.Task[None] | None = None

    async def heartbeat(self) -> bool:
        """Renew; False means the lease is gone (reaped, or the backend is down)."""
        if self.degraded:
            return True
        held = await self.store.heartbeat(self.holder)
        self.lost = self.lost or not held
        return held

    def keep_alive(
        self, interval: float, on_lost: Callable[[AsyncLease], object] | None = None
    ) -> asyncio.Task[None]:
        """Heartbeat every ``interval`` s until released; call ``on_lost`` once if it is lost.

        The interval should be a third of the store's timeout or less: a holder whose
        loop stalls longer than the timeout is reaped and learns it here.
        """
        async def beat() -> None:
            while True:
                await asyncio.sleep(interval)
                if not await self.heartbeat():
                    if on_lost is not None:
                        on_lost(self)
                    return

        if self._keeper is None or self._keeper.done():
            self._keeper = asyncio.get_running_loop().create_task(beat())
        return self._keeper

    async def release(self) -> bool:
        """Stop the keep-alive and give the slot back; True if this call removed it."""
        if self._keeper is not None:
            self._keeper.cancel()
            self._keeper = None
        if self.degraded:
            return False
        return await self.store.release(self.holder, self.granted_at)

    async def __aenter__(self) -> AsyncLease:
        return self

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.release()
