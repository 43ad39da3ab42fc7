"""Named leases on a global quota: the store interface and the handle a holder keeps.

A backend implements a few primitives with the semantics of docs/leases-claims.md — ``_try_acquire``
(reap members whose heartbeat is older than the timeout, count, add: one atomic step),
``_renew`` (refresh only a member still present and not expired), ``_remove``
(idempotent; both may answer ``Counted(done, held)`` with the live holders counted in the
same step, which keeps the held gauge current), ``holders`` and ``server_time`` — and
inherits everything else from here: holder ids, timing, the observer calls and the
failure policy. So Redis and SQLite report through one code path.

Every time a lease decision depends on is read by the backend itself (Redis ``TIME``
inside the script; SQLite's clock after the write lock is held), so a slow client, a
request queued behind a lock and a client whose clock is off cannot write a lease that
is already expired, nor reap a live one. The client's ``clock=`` is never consulted.

A holder is *loss-aware*: its handle knows the local ``time.monotonic()`` at which its
last confirmed renewal was sent, and treats the lease as lost once
``confirmed_at + timeout - margin`` passes without a new confirmation — before the
backend could reap it. ``store.hold()`` runs a body inside the lease and cancels it when
the lease is lost (asyncio) or raises ``LeaseLost`` at exit (threads); ``lease.valid()``
and ``lease.lost_event`` serve blocking code that cannot be cancelled. ``lease.token``
grows with every grant (fencing token for side effects).

Failure policy: a backend error never reaches the host as an exception. By default the
store fails closed (acquire rejects, heartbeat says "not held"), counts the error and
logs once; ``fail_open=True`` grants a *degraded* lease that the backend never saw.

Example::

    store = AsyncRedisLeaseStore("llm", url, limit=10, timeout=30)
    async with store.hold(wait=5) as lease:    # LeaseRejected if no slot within 5 s
        await call_model(fence=lease.token)    # cancelled, LeaseLost raised, if lost
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import threading
import time
import weakref
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from time import monotonic
from types import TracebackType
from typing import Any, Final, NamedTuple, Protocol, TypeVar

from prometheus_client import CollectorRegistry

from ..core.errors import ConfigError, LeaseLost, LeaseRejected
from ..core.guard import absorb
from ..core.lifecycle import AsyncClosing, Closing
from ..core.marker import blocking
from ..core.telemetry import HasTelemetry, Telemetry
from ..observer import AcquireOutcome, MetricsObserver, Observer
from .breaker import CircuitBreaker, ShortCircuited, open_pause, store_breaker
from .holder import HolderIds
from .provision import MustAwait

DEFAULT_TIMEOUT: Final = 30.0
#: share of the timeout a holder keeps in hand: it stops this long before the backend
#: could reap it (clock-rate drift, the time its work needs to notice the cancel)
MARGIN_SHARE: Final = 0.1
#: default heartbeat interval as a share of the timeout
HEARTBEAT_SHARE: Final = 1 / 3
DEFAULT_POLL: Final = 0.1
#: holder ids whose fenced admission was counted, remembered so that its retries are not
#: (bounded: the oldest is forgotten first)
_FENCED_MEMORY: Final = 1024
_QUOTA_RE: Final = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
H = TypeVar("H", bound="_LeaseHandle")


def _number(value: object, what: str, *, zero: bool = False) -> float:
    """A finite float > 0 (or >= 0 with ``zero``); bools, NaN and infinities refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{what} must be a number, got {value!r}", source="lease store")
    v = float(value)
    if not math.isfinite(v) or v < 0 or (v == 0 and not zero):
        bound = ">= 0" if zero else "> 0"
        raise ConfigError(f"{what} must be finite and {bound}, got {value!r}",
                          source="lease store")
    return v


class AcquireResult(NamedTuple):
    """What one atomic acquire saw: granted or not, ghosts reaped, holders after it, the
    grant's fencing token, and whether a restart fence refused it."""

    granted: bool
    reaped: int
    held: int
    token: int = 0
    fenced: bool = False


@dataclass(frozen=True, slots=True)
class Counted:
    """What a renewal or a removal did, with the quota's live holders counted in the same
    backend step. A backend that can count returns it instead of a bare bool, so the held
    gauge follows releases and renewals, not only acquires (an idle quota reads 0, not
    its last acquire's count). Truthy exactly when the renewal or removal took effect.
    """

    done: bool
    held: int

    def __bool__(self) -> bool:
        return self.done


class _LeaseCore(HasTelemetry):
    """Validation, instrumentation and failure policy shared by sync and async stores."""

    #: set by ``hold()``'s acquire loop: the last acquire's outcome (informational)
    _last_outcome: AcquireOutcome = "rejected"
    #: the owners (``catalog.ZEROED``) whose counters this store exposes at 0 on start
    _zeroed: tuple[str, ...] = ("lease-store",)

    def __init__(
        self,
        quota: str,
        *,
        limit: int,
        timeout: float = DEFAULT_TIMEOUT,
        heartbeat_interval: float | None = None,
        margin: float | None = None,
        observer: Observer | None = None,
        worker: str | None = None,
        registry: CollectorRegistry | None = None,
        fail_open: bool = False,
        breaker: CircuitBreaker | bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(quota, str) or not _QUOTA_RE.match(quota):
            raise ConfigError(f"quota name {quota!r} must be 1-64 of [A-Za-z0-9_.:-]",
                              source="lease store")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise ConfigError(f"limit must be an int >= 1, got {limit!r}", source="lease store")
        self.quota = quota
        self.limit = limit
        self.timeout = _number(timeout, "timeout")
        self.heartbeat_interval = (self.timeout * HEARTBEAT_SHARE if heartbeat_interval is None
                                   else _number(heartbeat_interval, "heartbeat_interval"))
        self.margin = (self.timeout * MARGIN_SHARE if margin is None
                       else _number(margin, "margin", zero=True))
        self._check_waits()
        # the worker label and registry of this store's series, resolved once
        self._telemetry = Telemetry.resolve(worker, registry)
        for owner in self._zeroed:
            self._telemetry.zero_counters(owner, quota=quota)
        self.observer = observer or MetricsObserver(worker=self.worker,
                                                    registry=self.registry)
        self.fail_open = fail_open
        #: the client's wall clock; no lease decision reads it (kept so a test can skew it)
        self.clock = clock
        self._ids = HolderIds(self.worker)
        self._fenced: dict[str, None] = {}
        self._fenced_lock = threading.Lock()
        #: short-circuits calls to a backend that failed repeatedly (see ``breaker.py``)
        self.breaker = store_breaker(breaker, f"lease:{quota}", self.timeout)
        if self.breaker is not None:
            self.breaker.bind(self.worker, self.registry)

    #: the handles granted and not yet released, while ``track()`` is on (else None)
    _live: weakref.WeakValueDictionary[str, _LeaseHandle] | None = None

    def track(self) -> Mapping[str, _LeaseHandle]:
        """From now on, keep the leases this store grants until released (weakly: a
        dropped handle leaves once collected); the view of them, by holder id. What
        aiomonitor's ``leases`` command reads (``integrations/monitor.py``)."""
        if self._live is None:
            self._live = weakref.WeakValueDictionary()
        return self._live

    def _handle(self, lease: H) -> H:
        if self._live is not None:
            self._live[lease.holder] = lease
        return lease

    def _untracked(self, holder: str) -> None:
        if self._live is not None:
            self._live.pop(holder, None)

    def store_wait(self) -> tuple[float, str]:
        """The longest one backend call may block, and what that wait is (for messages)."""
        return 0.0, "no store wait"

    def _check_waits(self) -> None:
        self.check_heartbeat(self.heartbeat_interval)

    def check_heartbeat(self, interval: float, *, source: str = "lease store") -> float:
        """``interval`` if a renewal every ``interval`` s keeps a lease of this store;
        else a ``ConfigError`` naming the numbers. The one check of every heartbeat /
        timeout pair: the store's own, ``keep_alive(interval)`` and ``CommandInbox.run``.

        A renewal is sent one interval after the last confirmed one and may block for the
        store's wait; it must come back before the holder's deadline (timeout - margin),
        or a slow but successful renewal would land after the lease had expired (another
        holder then gets the slot while this one still works).
        """
        interval = _number(interval, "heartbeat interval")
        wait, what = self.store_wait()
        total = interval + wait + self.margin
        if total >= self.timeout:
            longest = self.timeout - wait - self.margin
            fix = (f"lower the interval below {longest:.3g}s" if longest > 0
                   else "lower the wait") + f" or raise the timeout above {total:.3g}s"
            raise ConfigError(
                f"timeout {self.timeout:.3g}s is too short: heartbeat interval "
                f"{interval:.3g}s + {what} {wait:.3g}s + stop margin "
                f"{self.margin:.3g}s = {total:.3g}s; {fix}", source=source)
        return interval

    def new_holder(self) -> str:
        """A fresh holder id naming this worker and process (see ``holder.py``)."""
        return self._ids.new()

    def _acquired(self, res: AcquireResult, t0: float, holder: str) -> float | None:
        """Report one acquire; the grant time (a ``monotonic()`` reading) or None.

        One clock reading serves as both the end of the acquire latency and the handle's
        ``granted_at``: on the hot path every call counts (see bench/lease_bench.py).
        A fence refuses every retry of a waiting admission (one holder id) until it ends:
        the admission counts as ``fenced`` once, its retries only refresh the gauges.
        """
        t1 = monotonic()
        self._succeeded()
        if res.fenced:
            if self._fence_seen(holder):  # a retry: the gauges, not the count
                self._last_outcome = "fenced"
                self.observer.lease_counted(self.quota, held=res.held, limit=self.limit)
                return None
        elif self._fenced:
            self._fence_over(holder)
        outcome: AcquireOutcome = ("granted" if res.granted
                                   else "fenced" if res.fenced else "rejected")
        self._last_outcome = outcome
        self.observer.lease_acquired(self.quota, outcome, reaped=res.reaped, held=res.held,
                                     limit=self.limit, seconds=t1 - t0)
        return t1 if res.granted else None

    def _fence_seen(self, holder: str) -> bool:
        """Whether ``holder``'s admission was already counted as fenced (from now on it is)."""
        with self._fenced_lock:
            seen = self._fenced
            if holder in seen:
                return True
            if len(seen) >= _FENCED_MEMORY:
                del seen[next(iter(seen))]
            seen[holder] = None
            return False

    def _fence_over(self, holder: str) -> None:
        """The admission of ``holder`` left the fence (granted or rejected)."""
        with self._fenced_lock:
            self._fenced.pop(holder, None)

    def _gate(self) -> None:
        """Raise ``ShortCircuited`` (inside the call's ``try``) when the breaker is open."""
        b = self.breaker
        if b is not None and b.state != "closed" and not b.allow():
            raise ShortCircuited(self.quota)

    def _succeeded(self) -> None:
        b = self.breaker
        if b is not None and (b.streak or b.state != "closed"):
            b.success()

    def _failed(self, what: str, exc: BaseException) -> bool:
        """Absorb a backend error; the return value is the fail-open/closed decision.

        A short-circuit was counted by the breaker and reached no backend; an error the
        backend itself answered with (``backend_answered``) does not count as down.
        """
        if not isinstance(exc, ShortCircuited):
            if self.breaker is not None and not getattr(exc, "backend_answered", False):
                self.breaker.failure()
            absorb(f"lease-{what}", exc, telemetry=self._telemetry)
        return self.fail_open

    def _acquire_failed(self, exc: BaseException, t0: float) -> bool:
        self._last_outcome = "error"
        self.observer.lease_acquired(self.quota, "error", limit=self.limit,
                                     seconds=monotonic() - t0)
        if self._failed("acquire", exc):
            self._fail_open_granted()
            return True
        return False

    def _fail_open_granted(self) -> None:
        try:
            self._telemetry.child("corevo_lease_fail_open_total", quota=self.quota).inc()
        except Exception as exc:  # noqa: BLE001 - reporting never stops the grant
            absorb("lease-fail-open", exc, telemetry=self._telemetry)

    def _breaker_open(self) -> bool:
        b = self.breaker
        return b is not None and b.state != "closed" and self._last_outcome == "error"

    def _pause(self, started: float, wait: float, poll: float) -> float | None:
        """After a failed try: the pause before the next, or None (give up). While the
        breaker is open, ``BreakerOpen`` at once if the wait ends before the next probe,
        else the time until that probe (see ``breaker.open_pause``)."""
        if self._breaker_open():
            assert self.breaker is not None
            return open_pause(self.quota, self.breaker.retry_after(), started, wait)
        return self._rejected(started, wait, poll)

    def _count(self, answer: bool | Counted) -> bool:
        """A primitive's answer as a bool; a count that came with it goes to the gauge."""
        if isinstance(answer, Counted):
            self.observer.lease_counted(self.quota, held=answer.held, limit=self.limit)
            return answer.done
        return bool(answer)

    def _heartbeat_done(self, answer: bool | Counted) -> bool:
        self._succeeded()
        renewed = self._count(answer)
        self.observer.lease_heartbeat(self.quota, "renewed" if renewed else "lost")
        return renewed

    def _heartbeat_failed(self, exc: BaseException) -> None:
        self.observer.lease_heartbeat(self.quota, "error")
        self._failed("heartbeat", exc)

    def _released(self, answer: bool | Counted, granted_at: float | None) -> bool:
        self._succeeded()
        removed = self._count(answer)
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

    def _rejected(self, started: float, wait: float, poll: float) -> float | None:
        """The pause before the next try of a waiting acquire, or None: give up."""
        pause = poll * random.uniform(0.5, 1.5)  # noqa: S311 - jitter, not security
        if monotonic() + pause > started + wait:
            return None
        return pause


class _Waits(Protocol):
    quota: str

    def _pause(self, started: float, wait: float, poll: float) -> float | None: ...


def pauses(source: _Waits, wait: float, poll: float,
           outcome: Callable[[], str]) -> Iterator[float]:
    """The pauses of a waiting acquire, one per failed try (the sync and asyncio loops
    only sleep them); ``LeaseRejected`` naming the last ``outcome()`` once the wait is
    over (``BreakerOpen`` from ``_pause`` when the backend is known down past it). The
    wait is counted from this call, made before the first try."""
    started = monotonic()

    def each() -> Iterator[float]:
        while (pause := source._pause(started, wait, poll)) is not None:
            yield pause
        raise LeaseRejected(source.quota, outcome(), wait)

    return each()


class LeaseStore(_LeaseCore, Closing, ABC):
    """A blocking lease store; every call is one short round trip or transaction."""

    @abstractmethod
    def _try_acquire(self, holder: str) -> AcquireResult: ...

    @abstractmethod
    def _renew(self, holder: str) -> bool | Counted: ...

    @abstractmethod
    def _remove(self, holder: str) -> bool | Counted: ...

    @abstractmethod
    def holders(self) -> list[tuple[str, float]]:
        """Every member and its last heartbeat (backend unix seconds), ghosts included."""

    @abstractmethod
    def server_time(self) -> float:
        """The backend's clock (unix seconds): what heartbeats are compared with."""

    @blocking
    def declare_fresh(self) -> None:
        """Say that no holder of this quota exists anywhere, ending a restart fence now.

        Only for a quota that is provably new (a first deployment, a key made up for one
        run, a test). Never after a restart or failover: that is what the fence is for.
        """

    @blocking
    def provision(self) -> bool:
        """Deploy-time step: create the quota's restart-fence marker if it has none, so
        the first request is served (``provision.py``). True when this call created it;
        False when it existed or the backend has no fence (SQLite). Idempotent."""
        return False

    @blocking
    def close(self) -> None:
        """Release backend resources (not the leases)."""

    @blocking
    def acquire(self, *, wait: float = 0.0, holder: str | None = None,
                poll: float = DEFAULT_POLL) -> Lease | None:
        """A lease, or None when none came within ``wait`` s (quota full or fenced, the
        backend failed fail-closed, or its breaker is open past the wait). A wait retries
        every ~``poll`` s with one holder id, so no retry takes a second slot; the lease is
        not kept alive (``keep_alive()``) — ``hold()`` is that, in a block.
        """
        holder = holder or self._ids.new()
        if wait > 0:
            try:
                return self._obtain(wait, holder, poll)
            except LeaseRejected:
                return None
        # one atomic try, inline: the hot path the bench measures (no retry loop, no
        # exception, no further call layer)
        t0 = monotonic()
        try:
            self._gate()
            res = self._try_acquire(holder)
        except Exception as exc:  # noqa: BLE001 - backend failure becomes a policy decision
            if self._acquire_failed(exc, t0):
                return self._handle(Lease(self, holder, monotonic(), t0, 0, True))
            return None
        granted_at = self._acquired(res, t0, holder)
        return (None if granted_at is None
                else self._handle(Lease(self, holder, granted_at, t0, res.token)))

    def _obtain(self, wait: float, holder: str | None, poll: float) -> Lease:
        """A lease within ``wait`` s, else ``LeaseRejected`` (``BreakerOpen`` when the
        backend is known down past the wait): what ``hold()`` enters with."""
        holder = holder or self._ids.new()
        waits = pauses(self, wait, poll, lambda: self._last_outcome)
        while (lease := self.acquire(holder=holder)) is None:
            time.sleep(next(waits))
        return lease

    def _beat(self, holder: str) -> bool | None:
        """Renew: True renewed, False lost, None unknown (backend error, counted)."""
        try:
            self._gate()
            return self._heartbeat_done(self._renew(holder))
        except Exception as exc:  # noqa: BLE001
            self._heartbeat_failed(exc)
            return None

    @blocking
    def heartbeat(self, holder: str) -> bool:
        """Renew ``holder``; on a backend error the fail-open/closed decision."""
        state = self._beat(holder)
        return self.fail_open if state is None else state

    @blocking
    def release(self, holder: str, granted_at: float | None = None) -> bool:
        """Give ``holder``'s slot back; True if this call removed it."""
        self._untracked(holder)
        try:
            self._gate()
            return self._released(self._remove(holder), granted_at)
        except Exception as exc:  # noqa: BLE001
            return self._release_failed(exc)

    def hold(self, *, wait: float = 0.0, holder: str | None = None,
             poll: float = DEFAULT_POLL) -> Hold:
        """``with store.hold(wait=5) as lease:`` — acquire (waiting up to ``wait`` s, else
        ``LeaseRejected``), keep it alive in a thread, release on exit; ``LeaseLost`` at
        exit if it was lost meanwhile.

        Blocking code cannot be cancelled: check ``lease.valid()`` / ``lease.check()``
        between steps, or watch ``lease.lost_event``.
        """
        return Hold(lambda: self._obtain(wait, holder, poll))


class AsyncLeaseStore(_LeaseCore, AsyncClosing, ABC):
    """The same store for asyncio: primitives are coroutines."""

    @abstractmethod
    async def _try_acquire(self, holder: str) -> AcquireResult: ...

    @abstractmethod
    async def _renew(self, holder: str) -> bool | Counted: ...

    @abstractmethod
    async def _remove(self, holder: str) -> bool | Counted: ...

    @abstractmethod
    async def holders(self) -> list[tuple[str, float]]: ...

    @abstractmethod
    async def server_time(self) -> float: ...

    def declare_fresh(self) -> MustAwait[None]:
        """See ``LeaseStore.declare_fresh``: only for a quota that is provably new.
        ``await`` it: dropped un-awaited it logs an error instead of doing nothing
        silently."""
        return MustAwait(self._declare_fresh(), f"{type(self).__name__}.declare_fresh()")

    async def _declare_fresh(self) -> None:
        """The backend's part of ``declare_fresh`` (none without a restart fence)."""

    def provision(self) -> MustAwait[bool]:
        """See ``LeaseStore.provision``; ``await`` it (like ``declare_fresh``)."""
        return MustAwait(self._provision(), f"{type(self).__name__}.provision()")

    async def _provision(self) -> bool:
        return False

    async def aclose(self) -> None:
        """Release backend resources (not the leases)."""

    async def acquire(self, *, wait: float = 0.0, holder: str | None = None,
                      poll: float = DEFAULT_POLL) -> AsyncLease | None:
        """See ``LeaseStore.acquire``."""
        holder = holder or self._ids.new()
        if wait > 0:
            try:
                return await self._obtain(wait, holder, poll)
            except LeaseRejected:
                return None
        t0 = monotonic()
        try:
            self._gate()
            res = await self._try_acquire(holder)
        except Exception as exc:  # noqa: BLE001
            if self._acquire_failed(exc, t0):
                return self._handle(AsyncLease(self, holder, monotonic(), t0, 0, True))
            return None
        granted_at = self._acquired(res, t0, holder)
        return (None if granted_at is None
                else self._handle(AsyncLease(self, holder, granted_at, t0, res.token)))

    async def _obtain(self, wait: float, holder: str | None, poll: float) -> AsyncLease:
        """See ``LeaseStore._obtain``."""
        holder = holder or self._ids.new()
        waits = pauses(self, wait, poll, lambda: self._last_outcome)
        while True:  # a retry every pause: the backend is polled, nothing to wait on
            lease = await self.acquire(holder=holder)
            if lease is not None:
                return lease
            await asyncio.sleep(next(waits))

    async def _beat(self, holder: str) -> bool | None:
        try:
            self._gate()
            return self._heartbeat_done(await self._renew(holder))
        except Exception as exc:  # noqa: BLE001
            self._heartbeat_failed(exc)
            return None

    async def heartbeat(self, holder: str) -> bool:
        state = await self._beat(holder)
        return self.fail_open if state is None else state

    async def release(self, holder: str, granted_at: float | None = None) -> bool:
        """See ``LeaseStore.release``."""
        self._untracked(holder)
        try:
            self._gate()
            return self._released(await self._remove(holder), granted_at)
        except Exception as exc:  # noqa: BLE001
            return self._release_failed(exc)

    def hold(self, *, wait: float = 0.0, holder: str | None = None,
             poll: float = DEFAULT_POLL) -> AsyncHold:
        """``async with store.hold(wait=5) as lease:`` — the body runs inside the lease: it
        is kept alive in a task and, once lost, the body is cancelled and ``LeaseLost`` is
        raised out of the ``async with`` (like ``asyncio.timeout``)."""
        return AsyncHold(lambda: self._obtain(wait, holder, poll))


_event_lock = threading.Lock()  # lazily created events: creation and loss must not race


class _LeaseHandle:
    """State common to both handles: who holds, since when, and until when it is sure."""

    __slots__ = ("store", "holder", "quota", "granted_at", "degraded", "lost", "lost_reason",
                 "token", "confirmed_at", "_event", "_on_lost", "__weakref__")

    def __init__(self, store: _LeaseCore, holder: str, granted_at: float,
                 confirmed_at: float, token: int = 0, degraded: bool = False) -> None:
        self.store = store
        self.holder = holder
        self.quota = store.quota
        #: ``time.monotonic()`` when the store granted it
        self.granted_at = granted_at
        #: ``time.monotonic()`` when the last confirmed acquire/renewal was *sent*: the
        #: backend stamped it no earlier, so its expiry is no earlier than this + timeout
        self.confirmed_at = confirmed_at
        #: fencing token of this grant: larger for every later grant of the quota, also
        #: across a Redis restart (hand it to the resource a side effect writes to)
        self.token = token
        #: granted fail-open while the backend was down: the backend never saw it
        self.degraded = degraded
        #: set once the lease is known gone (sticky); ``lost_reason`` says how
        self.lost = False
        self.lost_reason: str | None = None
        self._event: threading.Event | None = None
        self._on_lost: list[Callable[[Any], object]] | None = None

    @property
    def deadline(self) -> float:
        """The ``monotonic()`` time after which this holder must not act on the lease."""
        return self.confirmed_at + self.store.timeout - self.store.margin

    @property
    def lost_event(self) -> threading.Event:
        """Set when the lease is lost (by the keep-alive or a failed check); any thread."""
        with _event_lock:
            if self._event is None:
                self._event = threading.Event()
                if self.lost:
                    self._event.set()
            return self._event

    def valid(self) -> bool:
        """True while the lease is still surely held: not lost and before the deadline.

        The check is local (no round trip), so blocking code may call it between steps.
        """
        if self.lost:
            return False
        if self.degraded or monotonic() < self.deadline:
            return True
        self._lose("unconfirmed")
        return False

    def check(self) -> None:
        """Raise ``LeaseLost`` unless ``valid()``: a checkpoint for blocking work."""
        if not self.valid():
            raise LeaseLost(self.quota, self.holder, self.lost_reason or "lost")

    def add_lost_callback(self, fn: Callable[[Any], object]) -> None:
        """Call ``fn(lease)`` once when the lease is lost (at once if it already is)."""
        if self.lost:
            self._call(fn)
            return
        if self._on_lost is None:
            self._on_lost = []
        self._on_lost.append(fn)

    def _call(self, fn: Callable[[Any], object]) -> None:
        try:
            fn(self)
        except Exception as exc:  # noqa: BLE001 - a callback must not stop the others
            absorb("lease-on-lost", exc, telemetry=self.store._telemetry)

    def _lose(self, reason: str) -> None:
        with _event_lock:
            if self.lost:
                return
            self.lost, self.lost_reason = True, reason
            event = self._event
        if reason == "unconfirmed":
            # judged lost by its own deadline, with no renewal to say so: still the
            # "live holder judged dead" that lost heartbeats expose (a renewal's "lost"
            # answer is counted where it arrives)
            self.store.observer.lease_heartbeat(self.quota, "lost")
        if event is not None:
            event.set()
        for fn in self._on_lost or ():
            self._call(fn)
        self._on_lost = None

    def _confirmed(self, state: bool | None, sent: float) -> bool:
        """Apply one renewal's answer (sent at ``sent``); True if the lease is held."""
        if state is None:
            if not self.store.fail_open:
                self.valid()  # an error confirms nothing; the deadline still stands
                return False
            state = True
        if not state:
            self._lose("lost")
            return False
        if self.lost or monotonic() >= self.deadline:
            self._lose("unconfirmed")  # the answer came too late to count
            return False
        self.confirmed_at = sent
        return True

    def __repr__(self) -> str:
        flags = " degraded" if self.degraded else " lost" if self.lost else ""
        return f"<{type(self).__name__} {self.quota} {self.holder} token={self.token}{flags}>"


class Lease(_LeaseHandle):
    """A granted slot. ``heartbeat()`` renews it; ``release()`` is safe to call twice
    (the second call is counted as a ``noop`` release, which is what exposes the path).
    ``keep_alive()`` renews from a daemon thread.
    """

    __slots__ = ("_stop", "_keeper")
    store: LeaseStore

    def __init__(self, store: LeaseStore, holder: str, granted_at: float,
                 confirmed_at: float, token: int = 0, degraded: bool = False) -> None:
        super().__init__(store, holder, granted_at, confirmed_at, token, degraded)
        self._stop: threading.Event | None = None
        self._keeper: threading.Thread | None = None

    def heartbeat(self) -> bool:
        """Renew; False means not confirmed (``lost`` is set once it is surely gone)."""
        if self.degraded:
            return True
        if not self.valid():
            return False
        sent = monotonic()
        return self._confirmed(self.store._beat(self.holder), sent)

    def keep_alive(self, interval: float | None = None,
                   on_lost: Callable[[Lease], object] | None = None) -> threading.Thread:
        """Renew every ``interval`` s (the store's by default) from a daemon thread until
        released or lost; ``on_lost(lease)`` runs in that thread, once."""
        every = (self.store.heartbeat_interval if interval is None
                 else self.store.check_heartbeat(interval, source="keep_alive"))
        if on_lost is not None:
            self.add_lost_callback(on_lost)
        if self._keeper is not None and self._keeper.is_alive():
            return self._keeper
        stop = self._stop = threading.Event()

        def keep() -> None:
            next_at = monotonic() + every
            while not stop.is_set():
                delay = min(next_at, self.deadline) - monotonic()
                if delay > 0 and stop.wait(delay):
                    return
                if not self.valid():
                    return
                next_at = monotonic() + every
                self.heartbeat()
                if self.lost:
                    return

        self._keeper = threading.Thread(target=keep, name=f"corevo-lease-{self.quota}",
                                        daemon=True)
        self._keeper.start()
        return self._keeper

    def release(self) -> bool:
        """Stop the keep-alive and give the slot back; True if this call removed it."""
        if self._stop is not None:
            self._stop.set()
            if self._keeper is not None and self._keeper is not threading.current_thread():
                self._keeper.join(self.store.store_wait()[0] + 0.5)
            self._stop = self._keeper = None
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
                 confirmed_at: float, token: int = 0, degraded: bool = False) -> None:
        super().__init__(store, holder, granted_at, confirmed_at, token, degraded)
        self._keeper: asyncio.Task[None] | None = None

    async def heartbeat(self) -> bool:
        """Renew; False means not confirmed (``lost`` is set once it is surely gone)."""
        if self.degraded:
            return True
        if not self.valid():
            return False
        sent = monotonic()
        return self._confirmed(await self.store._beat(self.holder), sent)

    def keep_alive(
        self, interval: float | None = None,
        on_lost: Callable[[AsyncLease], object] | None = None,
    ) -> asyncio.Task[None]:
        """Heartbeat every ``interval`` s (the store's by default) until released; call
        ``on_lost`` once when the lease is lost — renewal said so, or no renewal was
        confirmed before the deadline (a renewal still in flight then is abandoned).
        """
        every = (self.store.heartbeat_interval if interval is None
                 else self.store.check_heartbeat(interval, source="keep_alive"))
        if on_lost is not None:
            self.add_lost_callback(on_lost)

        async def beat() -> None:
            next_at = monotonic() + every
            while True:
                delay = min(next_at, self.deadline) - monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                if not self.valid():
                    return
                next_at = monotonic() + every
                try:
                    async with asyncio.timeout(self.deadline - monotonic()):
                        await self.heartbeat()
                except TimeoutError:
                    pass  # the next valid() call declares it lost
                if self.lost:
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


class Hold:
    """What ``hold()`` returns (made by a store or buffer, not by hand): the lease for a
    ``with`` block of blocking code. ``obtain`` gets it or raises ``LeaseRejected``."""

    def __init__(self, obtain: Callable[[], Lease]) -> None:
        self._obtain = obtain
        self.lease: Lease | None = None

    def __enter__(self) -> Lease:
        self.lease = self._obtain()
        self.lease.keep_alive()
        return self.lease

    def _give_back(self, lease: Lease) -> None:
        """End of the body: release (a buffer's hold keeps the lease instead)."""
        lease.release()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        lease = self.lease
        assert lease is not None
        self._give_back(lease)
        if et is None and (lease.lost or not lease.valid()):
            raise LeaseLost(lease.quota, lease.holder, lease.lost_reason or "lost")


class AsyncHold:
    """What an asyncio ``hold()`` returns (not made by hand): the body is cancelled when
    the lease is lost. ``obtain`` gets the lease or raises ``LeaseRejected``."""

    def __init__(self, obtain: Callable[[], Awaitable[AsyncLease]]) -> None:
        self._obtain = obtain
        self.lease: AsyncLease | None = None
        self._task: asyncio.Task[Any] | None = None
        self._in_body = False
        self._cancelled = False

    async def __aenter__(self) -> AsyncLease:
        self._task = asyncio.current_task()
        lease = self.lease = await self._obtain()
        self._in_body = True
        lease.keep_alive(on_lost=self._lost)
        return lease

    async def _give_back(self, lease: AsyncLease) -> None:
        """End of the body: release (a buffer's hold keeps the lease instead)."""
        await lease.release()

    def _lost(self, lease: AsyncLease) -> None:
        # Runs in the keeper task, so the body's task is suspended at an await: the
        # CancelledError lands inside the body, never in __aenter__/__aexit__.
        if self._in_body and self._task is not None and not self._task.done():
            self._cancelled = True
            self._task.cancel(f"lease {lease.quota} {lease.holder} {lease.lost_reason}")

    async def __aexit__(self, et: type[BaseException] | None, e: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._in_body = False
        lease = self.lease
        assert lease is not None and self._task is not None
        await self._give_back(lease)
        reason = lease.lost_reason or "lost"
        if self._cancelled:
            if self._task.uncancel() > 0:
                return  # cancelled from outside as well: that cancel goes on
            raise LeaseLost(lease.quota, lease.holder, reason) from e
        if et is None and lease.lost:
            raise LeaseLost(lease.quota, lease.holder, reason)
