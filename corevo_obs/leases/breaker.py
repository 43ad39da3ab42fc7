"""A circuit breaker for a lease backend that is down: stop calling it, then probe.

Without it a dead Redis costs every acquire and every renewal a full connect timeout, and
every caller of ``hold(wait=...)`` keeps retrying into it: a down backend becomes a
queue of hung tasks and a storm of connection attempts when it comes back. The breaker
counts *consecutive* backend failures (connection errors, timeouts); after ``failures``
of them it opens: calls are short-circuited — no request leaves the process — for
``backoff`` seconds, then one probe at a time is let through (half-open). A probe that
succeeds closes the breaker; one that fails opens it for another window. So while the
backend is down at most one call per window reaches it, and recovery needs no operator.

Fail-closed stays the policy: a short-circuited acquire is a rejection
(``BreakerOpen``, a ``LeaseRejected``, raised at once by ``hold()`` when its wait
ends before the next probe, ``acquire()`` then answers None; a longer wait sleeps
until the probe window instead of retrying), a short-circuited renewal confirms nothing
(the holder's deadline still stands). Only a store built with ``fail_open=True`` grants a
degraded lease instead, counted in ``corevo_lease_fail_open_total``.

Metrics: ``corevo_breaker_state`` (0 closed, 1 half-open, 2 open),
``corevo_breaker_transitions_total{to}``, ``corevo_breaker_short_circuited_total``.

Example::

    breaker = CircuitBreaker("lease:llm", failures=5, backoff=2.0)
    store = AsyncRedisLeaseStore("llm", url, limit=10, timeout=30, breaker=breaker)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from time import monotonic
from typing import Any, Final, Literal

from prometheus_client import REGISTRY, CollectorRegistry

from ..core.errors import ConfigError, LeaseRejected
from ..core.guard import absorb
from ..core.telemetry import Telemetry

State = Literal["closed", "half_open", "open"]
STATE_VALUE: Final[dict[State, int]] = {"closed": 0, "half_open": 1, "open": 2}
DEFAULT_FAILURES: Final = 5


class BreakerOpen(LeaseRejected):
    """The backend is known down: no call was made. ``retry_after`` is the time (s)
    until the breaker lets the next probe through; ``waited`` the time the acquire spent
    before it gave up (0 for one that does not wait)."""

    def __init__(self, quota: str, retry_after: float, waited: float = 0.0) -> None:
        super().__init__(quota, "unavailable", waited)
        self.retry_after = retry_after
        self.args = (f"{self.args[0]}: the backend is known down, next probe in "
                     f"{max(retry_after, 0.0):.1f}s",)


class ShortCircuited(Exception):  # noqa: N818 - a signal inside the store, never raised out
    """Raised inside a store's call when the breaker is open: no request was sent."""

    backend_answered = False


class CircuitBreaker:
    """closed → (``failures`` in a row) → open → (``backoff`` s) → half-open → one probe.

    Thread-safe and loop-agnostic (no awaits inside): a sync store's keeper threads and an
    async store's tasks share it alike. A probe that never reports (its task was
    cancelled) is given up after ``backoff`` seconds, so the breaker cannot stick.
    ``clock`` is injectable for tests. Given ``worker=`` or ``registry=`` it reports at
    once; given neither, the store it is handed to binds it to the store's own.
    """

    def __init__(self, name: str, *, failures: int = DEFAULT_FAILURES, backoff: float = 1.0,
                 worker: str | None = None, registry: CollectorRegistry | None = None,
                 clock: Callable[[], float] = monotonic) -> None:
        if isinstance(failures, bool) or not isinstance(failures, int) or failures < 1:
            raise ConfigError(f"breaker failures must be an int >= 1, got {failures!r}",
                              source="circuit breaker")
        if isinstance(backoff, bool) or not isinstance(backoff, int | float) \
                or not 0 < backoff < float("inf"):
            raise ConfigError(f"breaker backoff must be a finite number of seconds > 0, "
                              f"got {backoff!r}", source="circuit breaker")
        self.name, self.failures, self.backoff = name, failures, float(backoff)
        self._clock = clock
        self._telemetry: Telemetry | None = None  # who reports, once bound
        self._lock = threading.Lock()
        self.state: State = "closed"
        #: consecutive failures so far (0 after any success)
        self.streak = 0
        self._opened_at = 0.0
        self._probe_at: float | None = None  # when the running probe was let through
        self._children: dict[str, Any] | None = None
        if worker is not None or registry is not None:  # else a store binds it
            t = Telemetry.resolve(worker, registry)
            self.bind(t.worker, t.registry)

    @property
    def worker(self) -> str:
        """The ``worker`` label of its series (``"unknown"`` until bound)."""
        return "unknown" if self._telemetry is None else self._telemetry.worker

    @property
    def registry(self) -> CollectorRegistry:
        """The registry its series go to (the global one until bound)."""
        return REGISTRY if self._telemetry is None else self._telemetry.registry

    def bind(self, worker: str, registry: CollectorRegistry | None) -> None:
        """Report as ``worker`` into ``registry`` (a store hands its own to the breaker)."""
        self._telemetry = Telemetry.resolve(worker, registry)
        self._bind()
        self._show()

    def _bind(self) -> None:
        try:
            from ..core.metrics import child

            labels = {"worker": self.worker, "backend": self.name}
            self._children = {
                "state": child("corevo_breaker_state", self.registry, **labels),
                "short": child("corevo_breaker_short_circuited_total", self.registry,
                               **labels),
                **{to: child("corevo_breaker_transitions_total", self.registry,
                             to=to, **labels) for to in STATE_VALUE},
            }
        except Exception as exc:  # noqa: BLE001 - reporting must not stop the breaker
            self._children = None
            absorb("breaker", exc, worker=self.worker, registry=self.registry)

    def _show(self) -> None:
        if self._children is not None:
            self._children["state"].set(STATE_VALUE[self.state])

    def _move(self, to: State) -> None:  # under the lock
        self.state = to
        if self._children is not None:
            self._children[to].inc()
            self._children["state"].set(STATE_VALUE[to])

    def allow(self) -> bool:
        """Whether this call may go to the backend; False is a short-circuit (counted)."""
        state = self.state  # a local: the re-read under the lock below is not narrowed
        if state == "closed":  # the hot path: one attribute read
            return True
        with self._lock:
            now = self._clock()
            if self.state == "open" and now >= self._opened_at + self.backoff:
                self._move("half_open")
            if self.state == "half_open" and (
                    self._probe_at is None or now >= self._probe_at + self.backoff):
                self._probe_at = now
                return True
            if self.state == "closed":
                return True
        if self._children is not None:
            self._children["short"].inc()
        return False

    def retry_after(self) -> float:
        """Seconds until the next probe may go out (0 when closed)."""
        with self._lock:
            if self.state == "closed":
                return 0.0
            start = self._opened_at if self.state == "open" else (self._probe_at or 0.0)
            return max(0.0, start + self.backoff - self._clock())

    def success(self) -> None:
        """The backend answered: the streak ends; a probe's success closes the breaker."""
        if self.state == "closed" and self.streak == 0:
            return
        with self._lock:
            self.streak = 0
            self._probe_at = None
            if self.state != "closed":
                self._move("closed")

    def failure(self) -> None:
        """One backend failure: the ``failures``-th in a row, or a failed probe, opens."""
        with self._lock:
            self.streak += 1
            if self.state == "half_open" or (
                    self.state == "closed" and self.streak >= self.failures):
                self._opened_at = self._clock()
                self._probe_at = None
                self._move("open")


def open_pause(quota: str, retry_after: float, started: float, wait: float) -> float:
    """For a waiting acquire while the breaker is open: ``BreakerOpen`` at once when the
    wait ends before the next probe may go out (no grant can come in time), else the
    pause until then — never a busy retry into the open breaker."""
    now = monotonic()
    if now + retry_after > started + wait:
        raise BreakerOpen(quota, retry_after, now - started)
    return max(retry_after, 0.01)


def default_breaker(name: str, timeout: float) -> CircuitBreaker:
    """The breaker a store builds for ``breaker=True``: 5 failures, a back-off of a
    quarter of the lease timeout (at most 5 s), so a holder whose renewal is
    short-circuited still gets a probe well before its deadline."""
    return CircuitBreaker(name, failures=DEFAULT_FAILURES, backoff=min(5.0, timeout / 4))


def store_breaker(breaker: object, name: str, timeout: float) -> CircuitBreaker | None:
    """A store's ``breaker=`` option: True the default breaker, False none, or the
    caller's own; anything else (None, the 0.1 ``"default"``) is a ``ConfigError``, so
    "no breaker" is always said as ``False``."""
    if isinstance(breaker, CircuitBreaker):
        return breaker
    if breaker is True:
        return default_breaker(name, timeout)
    if breaker is False:
        return None
    raise ConfigError(f"breaker= takes True (the default breaker), False (none) or a "
                      f"CircuitBreaker, not {breaker!r}", source="lease store")
