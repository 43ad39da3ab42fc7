"""Loop utilization: the share of wall time the loop ran callbacks instead of waiting.

The Python counterpart of Node's event-loop utilization. Lag says how late the loop was;
utilization says how close it is to being late: a loop busy 90 % of the time has no
room for a burst even while its lag is still low.

Two sources, chosen by the loop:

* asyncio's selector loops: the selector's ``select`` is timed (one wrapper on the
  selector instance; two clock reads per call that may wait, none for the zero-timeout
  poll between ready callbacks); busy is wall time minus time inside ``select``,
  exactly what Node counts.
* any other loop (uvloop's libuv poll is out of Python's reach): the loop thread's time
  on a CPU or runnable waiting for one (``/proc/self/task/<tid>/schedstat``, one
  ``pread``): the time it was not asleep in the kernel. Two differences from the
  selector's count: a callback blocked in a syscall (``time.sleep``, a synchronous
  socket read) or waiting for the GIL reads idle (the watchdog reports such a callback
  as a stall), and on a machine short of CPU each wake-up's wait for a CPU reads busy
  (Node counts it as waiting; it does mean the loop has less room). Without schedstat
  (not Linux) there is no reading and no series.

The counter is brought up to date from the lag sampler's beats at most every
``FLUSH_INTERVAL`` seconds, so its ``rate()`` over a window is the utilization.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Final, Protocol

from prometheus_client import CollectorRegistry

from ..core import guard
from ..core.telemetry import HasTelemetry, Telemetry
from .schedstat import ThreadProbe, parse

FLUSH_INTERVAL: Final = 0.25
METRIC: Final = "corevo_event_loop_busy_seconds_total"


class _Source(Protocol):
    kind: str

    def busy(self) -> float | None: ...

    def close(self) -> None: ...


class _SelectTimer:
    """Times the selector's ``select``: the loop is idle exactly while inside it."""

    kind = "selector"

    def __init__(self, selector: Any) -> None:
        self._selector = selector
        self._inner = selector.select
        self._shadowed = selector.__dict__.get("select")  # a wrapper someone put before
        self._own = self._timed  # one bound method: close() recognises it
        self._started = time.perf_counter()
        self.idle = 0.0
        selector.select = self._own

    def _timed(self, timeout: float | None = None) -> Any:
        if timeout == 0:  # a poll between ready callbacks: the loop is not waiting
            return self._inner(timeout)
        t0 = time.perf_counter()
        ready = self._inner(timeout)
        self.idle += time.perf_counter() - t0
        return ready

    def busy(self) -> float:
        # on the loop thread (a beat), never inside select: no idle interval is open
        return time.perf_counter() - self._started - self.idle

    def close(self) -> None:
        if self._selector.__dict__.get("select") is not self._own:
            return  # wrapped again since: leave the chain alone
        if self._shadowed is None:
            del self._selector.select
        else:
            self._selector.select = self._shadowed


class _SchedTimer:
    """The loop thread's CPU time plus run delay (for loops without a Python selector)."""

    kind = "schedstat"

    def __init__(self) -> None:
        self._probe = ThreadProbe(threading.get_native_id())
        first = parse(self._probe.read())
        self._base = None if first is None else first[0] + first[1]

    def busy(self) -> float | None:
        now = parse(self._probe.read())
        if now is None or self._base is None:
            return None
        return (now[0] + now[1] - self._base) / 1e9

    def close(self) -> None:
        self._probe.close()


def _source_for(loop: asyncio.AbstractEventLoop) -> _Source | None:
    selector = getattr(loop, "_selector", None)
    if selector is not None and hasattr(selector, "__dict__") and callable(
            getattr(selector, "select", None)):
        return _SelectTimer(selector)
    sched = _SchedTimer()
    if sched.busy() is None:
        sched.close()
        return None
    return sched


class LoopUtilization(HasTelemetry):
    """Busy seconds of one loop, on a counter per worker; ``share`` for a window.

    Start and read it on the loop's thread (``LoopHealth`` does both)::

        util = LoopUtilization(worker="w0").start()
        before = util.read()
        ...
        print(util.share(before))  # 0.0 .. 1.0
    """

    def __init__(
        self,
        *,
        worker: str | None = None,
        registry: CollectorRegistry | None = None,
        flush_interval: float = FLUSH_INTERVAL,
    ) -> None:
        self._telemetry = Telemetry.resolve(worker, registry)
        self._flush_interval = flush_interval
        self._source: _Source | None = None
        self._counter: Any = None
        self._flushed_at = 0.0
        self._flushed_busy = 0.0

    @property
    def kind(self) -> str | None:
        """``selector``, ``schedstat`` or None (no reading on this loop and platform)."""
        return None if self._source is None else self._source.kind

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> LoopUtilization:
        """Begin measuring ``loop`` (default: the running one) from its next iteration,
        on its thread (whose schedstat file the uvloop source reads)."""
        # opens /proc/self/task/<tid>/schedstat once (procfs, no disk behind it), one
        # place for every caller's coroutine
        (loop or asyncio.get_running_loop()).call_soon(self._begin, loop)  # noqa: COB110
        return self

    def _begin(self, loop: asyncio.AbstractEventLoop | None) -> None:
        loop = loop or asyncio.get_running_loop()
        try:
            self._source = _source_for(loop)
            if self._source is not None:
                self._counter = self._telemetry.child(METRIC)
        except Exception as exc:  # noqa: BLE001 - no reading rather than a broken host
            guard.absorb("loop_utilization", exc, telemetry=self._telemetry)
            self._source = None
        self._flushed_at = time.perf_counter()

    def read(self) -> tuple[float, float]:
        """(wall, busy) seconds on monotonic clocks; busy is NaN with no source."""
        busy = None if self._source is None else self._source.busy()
        return time.perf_counter(), float("nan") if busy is None else busy

    def share(self, since: tuple[float, float]) -> float:
        """Utilization between ``since`` (an earlier :meth:`read`) and now."""
        wall, busy = self.read()
        span = wall - since[0]
        return (busy - since[1]) / span if span > 0 else 0.0

    def beat(self, woke: float, lag: float) -> None:
        """A lag-sampler listener: brings the counter up to date every flush interval."""
        if self._source is None or time.perf_counter() - self._flushed_at < self._flush_interval:
            return
        self.flush()

    def flush(self) -> None:
        """Add the busy time since the last flush to the counter."""
        if self._source is None:
            return
        busy = self._source.busy()
        self._flushed_at = time.perf_counter()
        if busy is None or busy <= self._flushed_busy:
            return
        self._counter.inc(busy - self._flushed_busy)
        self._flushed_busy = busy

    def close(self) -> None:
        """Flush and take the timer off the loop; safe to call twice."""
        source = self._source
        if source is None:
            return
        try:
            self.flush()
        except Exception as exc:  # noqa: BLE001
            guard.absorb("loop_utilization", exc, telemetry=self._telemetry)
        self._source = None
        source.close()
