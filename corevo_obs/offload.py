"""A bounded, instrumented adapter that runs blocking callables in threads.

Moving a sync SDK call to a thread keeps the loop free but does not bound capacity: the
blockage moves to the thread pool's queue. This adapter bounds it, with the semantics
that keep the bound true under cancellation:

- a slot follows the *thread operation*, not the awaiting caller: a caller cancelled
  (or timed out) while its call runs does not free the slot; the slot is freed when the
  executor's future says the thread call returned, and ``in_flight`` counts exactly those
  thread calls;
- the operation is shielded from the caller and never exposed; if it is cancelled anyway
  (e.g. loop shutdown) while its thread runs, the thread cannot be stopped and the
  operation's owner is gone, so its slot sinks for good (fail closed), is counted and
  reported to ``on_background_error``;
- callers wait in a bounded FIFO queue with a timeout, and get a typed
  ``OffloadRejected`` when it is full, when they waited too long, or after close;
- ``aclose()`` stops admissions first, then drains every running operation.

Example::

    store = OffloadAdapter(name="object_store", max_in_flight=8)
    await store.run(client.put_object, key, payload)
    await store.aclose()
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import functools
import re
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any, Final, NoReturn, ParamSpec, TypeVar

from prometheus_client import CollectorRegistry

from .core import guard
from .core.errors import ConfigError, CorevoObsError
from .core.telemetry import HasTelemetry, Telemetry

__all__ = [
    "AdapterClosed",
    "OffloadAdapter",
    "OffloadRejected",
    "QueueFull",
    "SlotSunk",
    "WaitTimeout",
]


DEFAULT_MAX_WAITING: Final = 64
DEFAULT_WAIT_TIMEOUT: Final = 30.0
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")

P = ParamSpec("P")
R = TypeVar("R")
ErrorCallback = Callable[[BaseException], None]


class OffloadRejected(CorevoObsError):
    """The adapter refused to admit a call; nothing ran. ``reason`` is the metric label."""

    reason: str = ""

    def __init__(self, message: str, *, adapter: str) -> None:
        self.adapter = adapter
        super().__init__(f"offload adapter {adapter!r}: {message}")


class QueueFull(OffloadRejected):
    """All slots are taken and ``max_waiting`` callers already wait: overload."""

    reason = "queue_full"


class WaitTimeout(OffloadRejected):
    """No slot freed within ``wait_timeout``."""

    reason = "timeout"

    def __init__(self, message: str, *, adapter: str, waited: float) -> None:
        self.waited = waited
        super().__init__(message, adapter=adapter)


class AdapterClosed(OffloadRejected):
    """The adapter is closing or closed; admissions have stopped."""

    reason = "closed"


class SlotSunk(CorevoObsError):
    """Delivered to ``on_background_error``: an operation was cancelled, its slot is gone."""

    def __init__(self, *, adapter: str, remaining: int) -> None:
        self.adapter = adapter
        self.remaining = remaining
        super().__init__(
            f"offload adapter {adapter!r}: an operation was cancelled and its thread may "
            f"still run; its slot is given up for good ({remaining} slots remain)"
        )


class _Operation:
    """Bookkeeping of one admitted call; lives until its thread call returns."""

    __slots__ = ("started", "thread_call", "result", "orphaned", "sunk", "exc", "reported")

    def __init__(self, started: float, thread_call: Future[Any], result: asyncio.Future[Any]):
        self.started = started
        self.thread_call = thread_call  # the executor's future: done when the thread returned
        self.result = result  # the thread call's outcome, copied onto the loop
        self.orphaned = False  # the caller stopped awaiting (cancelled, timed out)
        self.sunk = False  # the operation task was cancelled while the thread ran
        self.exc: BaseException | None = None
        self.reported = False  # an error was handed to the callback

    def age(self, now: float) -> float:
        return now - self.started


class OffloadAdapter(HasTelemetry):
    """Run blocking callables in threads, at most ``max_in_flight`` at a time.

    One adapter per dependency (``name`` is its bounded ``adapter`` label), usable by any
    client. By default it owns a thread pool sized to ``max_in_flight``, so a slot is a
    thread and no call queues invisibly inside the pool. ``on_background_error`` receives
    errors no caller will see: an operation that failed after its caller was cancelled,
    and ``SlotSunk``; it runs on the loop and must not block.
    """

    def __init__(
        self,
        *,
        name: str,
        max_in_flight: int,
        max_waiting: int = DEFAULT_MAX_WAITING,
        wait_timeout: float | None = DEFAULT_WAIT_TIMEOUT,
        on_background_error: ErrorCallback | None = None,
        worker: str | None = None,
        registry: CollectorRegistry | None = None,
        executor: Executor | None = None,
    ) -> None:
        problems = []
        if not _NAME.match(name):
            problems.append(f"name {name!r} must match {_NAME.pattern} (it is a metric label)")
        if max_in_flight < 1:
            problems.append(f"max_in_flight must be >= 1, got {max_in_flight}")
        if max_waiting < 0:
            problems.append(f"max_waiting must be >= 0, got {max_waiting}")
        if wait_timeout is not None and wait_timeout <= 0:
            problems.append(f"wait_timeout must be > 0 or None, got {wait_timeout}")
        if problems:
            raise ConfigError("; ".join(problems), source="OffloadAdapter")
        self.name = name
        self.max_in_flight = max_in_flight
        self.max_waiting = max_waiting
        self.wait_timeout = wait_timeout
        self._telemetry = Telemetry.resolve(worker, registry)
        self._on_error = on_background_error
        self._executor = executor
        self._owns_executor = executor is None
        self._free = max_in_flight
        self._sunk = 0
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._running: dict[asyncio.Task[Any], _Operation] = {}  # until the thread returns
        self._drained: asyncio.Future[None] | None = None
        self._closed = False

        c = functools.partial(self._telemetry.child, adapter=name)
        self._in_flight = c("corevo_offload_in_flight")
        self._waiting = c("corevo_offload_waiting")
        self._slot_wait = c("corevo_offload_slot_wait_seconds")
        self._sunk_total = c("corevo_offload_sunk_slots_total")
        self._errors = c("corevo_offload_errors_total")
        self._duration = {
            o: c("corevo_offload_duration_seconds", outcome=o)
            for o in ("ok", "error", "cancelled")
        }
        self._rejected = {
            r: c("corevo_offload_rejected_total", reason=r)
            for r in ("queue_full", "timeout", "closed")
        }
        c("corevo_offload_limit").set(max_in_flight)

    # --- state, for monitors and tests -------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Thread calls that have not returned, sunk ones included: threads really busy."""
        return len(self._running)

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    @property
    def sunk(self) -> int:
        """Slots given up for good; ``max_in_flight - sunk`` calls can still run at once."""
        return self._sunk

    @property
    def closed(self) -> bool:
        return self._closed

    def snapshot(self) -> dict[str, Any]:
        """Current state for the aiomonitor ``offloads`` command (safe from another thread)."""
        ops = list(self._running.values())
        now = time.perf_counter()
        return {
            "in_flight": len(ops), "limit": self.max_in_flight, "waiting": len(self._waiters),
            "sunk": self._sunk, "closed": self._closed,
            "callers_gone": sum(op.orphaned for op in ops),
            "oldest": max((op.age(now) for op in ops), default=0.0),
        }

    # --- the call path -----------------------------------------------------------------

    async def run(self, func: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``func(*args, **kwargs)`` in a thread once a slot is free; return its result.

        Raises ``OffloadRejected`` (nothing ran) or whatever ``func`` raised. Cancelling
        the caller does not stop the thread call, and its slot stays taken until it returns.
        """
        await self._admit()
        if self._closed:  # granted a slot, but close began before this call resumed
            self._release()
            self._reject(AdapterClosed("closed before the call started", adapter=self.name))
        loop = asyncio.get_running_loop()
        call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
        try:
            thread_call = self._pool().submit(call)
        except BaseException:
            self._release()
            raise
        op = _Operation(time.perf_counter(), thread_call, loop.create_future())
        task = loop.create_task(_outcome(op.result), name=f"corevo-offload:{self.name}")
        self._running[task] = op
        self._in_flight.inc()
        # The slot follows the thread: it is freed when the executor's future completes,
        # which happens before the result reaches the operation task and the caller.
        thread_call.add_done_callback(functools.partial(self._thread_returned, loop, task))
        task.add_done_callback(self._task_done)  # before shield's: sink before the caller
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            op.orphaned = True
            if task not in self._running:  # the thread call is over (_returned ran)
                self._report_once(op)  # it failed as we were cancelled: nobody else knows
            raise

    def _pool(self) -> Executor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                max_workers=self.max_in_flight, thread_name_prefix=f"corevo-offload-{self.name}"
            )
        return self._executor

    async def _admit(self) -> None:
        if self._closed:
            self._reject(AdapterClosed("closed to new calls", adapter=self.name))
        while self._waiters and self._waiters[0].done():
            self._waiters.popleft()  # timed out or cancelled, not yet cleaned up
        if self._free > 0 and not self._waiters:
            self._free -= 1
            self._slot_wait.observe(0.0)
            return
        if len(self._waiters) >= self.max_waiting:
            self._reject(QueueFull(
                f"{self.in_flight} calls running and {len(self._waiters)} waiting "
                f"(max_waiting={self.max_waiting})", adapter=self.name,
            ))
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiters.append(waiter)
        self._waiting.inc()
        t0 = time.perf_counter()
        timer = None
        if self.wait_timeout is not None:
            timer = loop.call_later(self.wait_timeout, self._expire, waiter, t0)
        try:
            await waiter
        except asyncio.CancelledError:
            if _granted(waiter):
                self._release()  # granted as we were cancelled: pass the slot on
            raise
        except OffloadRejected as exc:
            self._reject(exc)
        finally:
            if timer is not None:
                timer.cancel()
            if not _granted(waiter):
                self._discard(waiter)
            self._waiting.dec()
        self._slot_wait.observe(time.perf_counter() - t0)

    def _expire(self, waiter: asyncio.Future[None], t0: float) -> None:
        if not waiter.done():
            waited = time.perf_counter() - t0
            waiter.set_exception(WaitTimeout(
                f"no slot within wait_timeout={self.wait_timeout}s", adapter=self.name,
                waited=waited,
            ))

    def _discard(self, waiter: asyncio.Future[None]) -> None:
        try:
            self._waiters.remove(waiter)
        except ValueError:
            pass

    def _reject(self, exc: OffloadRejected) -> NoReturn:
        self._rejected[exc.reason].inc()
        raise exc

    def _release(self) -> None:
        """Hand a freed slot to the oldest live waiter, or return it to the pool."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1

    def _thread_returned(
        self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], _: Future[Any]
    ) -> None:
        """In the worker thread (or on the loop, for a call cancelled before it started)."""
        try:
            loop.call_soon_threadsafe(self._returned, task)
        except RuntimeError:
            pass  # the loop is closed: nobody is left to account to

    def _returned(self, task: asyncio.Task[Any]) -> None:
        """On the loop: the thread call is over, so its slot can be freed (unless sunk)."""
        op = self._running.pop(task)
        self._in_flight.dec()
        thread_call = op.thread_call
        if thread_call.cancelled():  # never started: nothing to report, nothing ran
            outcome = "cancelled"
        else:
            op.exc = thread_call.exception()
            outcome = "cancelled" if op.sunk else "ok" if op.exc is None else "error"
        self._duration[outcome].observe(time.perf_counter() - op.started)
        if not op.sunk:
            self._release()
        if op.exc is not None:
            self._errors.inc()
            if op.orphaned or op.sunk:
                self._report_once(op)
        if not op.result.done():
            if thread_call.cancelled():
                op.result.cancel()
            elif op.exc is not None:
                op.result.set_exception(op.exc)
            else:
                op.result.set_result(thread_call.result())
        if not self._running and self._drained is not None and not self._drained.done():
            self._drained.set_result(None)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        op = self._running.get(task)
        if op is None or not task.cancelled():
            return  # the thread returned first: _returned did the accounting
        op.result.cancel()
        if op.thread_call.cancel() or op.thread_call.done():
            return  # not started, or just returned: no thread runs it, _returned frees it
        # The operation was cancelled while its thread runs (e.g. loop shutdown): fail closed.
        op.sunk = True
        self._sunk += 1
        self._sunk_total.inc()
        self._report(SlotSunk(adapter=self.name, remaining=self.max_in_flight - self._sunk))

    def _report_once(self, op: _Operation) -> None:
        if op.exc is not None and not op.reported:
            op.reported = True
            self._report(op.exc)

    def _report(self, exc: BaseException) -> None:
        if self._on_error is None:
            guard.log.warning("offload adapter %r: background error: %r", self.name, exc)
            return
        try:
            self._on_error(exc)
        except Exception as err:  # noqa: BLE001 - a faulty callback must not break the loop
            guard.absorb("offload.callback", err, telemetry=self._telemetry)

    # --- shutdown ----------------------------------------------------------------------

    async def aclose(self) -> None:
        """Stop admissions, reject the queued callers, then wait for every operation.

        Bound it with ``asyncio.timeout(...)`` if needed: cancelling ``aclose`` does not
        cancel the operations (they are shielded), it only stops waiting for them.
        """
        self._closed = True
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(AdapterClosed("closed while waiting", adapter=self.name))
        if self._running:
            if self._drained is None or self._drained.done():
                self._drained = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._drained)
        if self._owns_executor and self._executor is not None:
            self._executor.shutdown(wait=False)

    async def __aenter__(self) -> OffloadAdapter:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


async def _outcome(result: asyncio.Future[R]) -> R:
    """The operation task: waits for the thread call's outcome, copied onto the loop."""
    return await result


def _granted(waiter: asyncio.Future[None]) -> bool:
    return waiter.done() and not waiter.cancelled() and waiter.exception() is None
