"""Loop lag sampler and the frozen-now heartbeat.

A coroutine sleeps a fixed interval and records how late it woke: that oversleep is the
scheduling debt every task on this loop paid. A lag sample can only complete once the
loop runs again, so the same tick also stamps a heartbeat gauge; its *age* keeps growing
during a freeze, which lets an alert fire while the loop is still stuck.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Final

from prometheus_client import CollectorRegistry

from ..core import guard
from ..core.errors import ConfigError
from ..core.lifecycle import AsyncService, astops, starts
from ..core.telemetry import HasTelemetry, Telemetry

DEFAULT_INTERVAL: Final = 0.02

BeatListener = Callable[[float, float], None]
"""Called on the loop thread after each tick with (monotonic wake time, lag seconds).
One that raises is counted (component ``lag_listener``) and called again next tick."""


class LoopLagSampler(HasTelemetry, AsyncService):
    """Per-loop lag histogram and heartbeat, one series per worker.

    Example (inside a running loop)::

        sampler = LoopLagSampler(worker="w0")
        sampler.start()  # or: async with LoopLagSampler(worker="w0") as sampler:
        await sampler.aclose()
    """

    def __init__(
        self,
        *,
        interval: float = DEFAULT_INTERVAL,
        worker: str | None = None,
        registry: CollectorRegistry | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if not 0.001 <= interval <= 60:
            raise ConfigError(f"lag sampler interval must be within 1 ms..60 s, got {interval}")
        self.interval = interval
        self._telemetry = Telemetry.resolve(worker, registry)
        self._wall = wall_clock
        self._lag = self._telemetry.child("corevo_event_loop_lag_seconds")
        # bound at the first stamp: a series born at 0 would read as a heartbeat 56 years
        # old (``time() - 0``) to every alert and panel until the sampler's first tick
        self._heartbeat: Any = None
        self._listeners: list[BeatListener] = []
        self._task: asyncio.Task[None] | None = None
        self.last_lag = 0.0
        self.max_lag = 0.0
        self.ticks = 0  # completed samples: what the instrumentation's cost scales with

    def add_listener(self, listener: BeatListener) -> None:
        self._listeners.append(listener)

    def _is_running(self) -> bool:
        """True while the sampling task runs (it ends with its loop, or by ``aclose()``)."""
        return self._task is not None and not self._task.done()

    @starts
    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Sample the running loop (or ``loop``) until ``aclose()``; returns the sampler.
        Started once: a second start or an ``async with`` after it keeps the one task."""
        loop = loop or asyncio.get_running_loop()
        self._task = loop.create_task(self.run(), name=f"corevo-lag-sampler[{self.worker}]")


    @astops
    async def aclose(self) -> None:
        """Stop sampling; safe to call twice."""
        task, self._task = self._task, None
        if task is None:
            return
        if task.done():
            self._retrieve(task)
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise
        except Exception as exc:  # noqa: BLE001 - run() absorbs per tick; belt and braces
            self._absorb("lag_sampler", exc)

    def _retrieve(self, task: asyncio.Task[None]) -> None:
        """Count a sampler that ended by an exception instead of hiding it (a stale
        heartbeat on a healthy worker would page someone)."""
        if not task.cancelled() and task.exception() is not None:
            self._absorb("lag_sampler", task.exception())  # type: ignore[arg-type]

    def _absorb(self, component: str, exc: BaseException) -> None:
        guard.absorb(component, exc, telemetry=self._telemetry)

    def _stamp(self) -> None:
        try:
            now = self._wall()
            if self._heartbeat is None:
                self._heartbeat = self._telemetry.child(
                    "corevo_event_loop_heartbeat_timestamp_seconds")
            self._heartbeat.set(now)
        except Exception as exc:  # noqa: BLE001 - never let the host see this
            self._absorb("heartbeat", exc)

    def _tick(self, woke: float, lag: float) -> None:
        """Everything after a wake-up; a raising metric or listener is counted, and the
        next tick (so the heartbeat and the watchdog's beats) comes all the same."""
        try:
            self._lag.observe(lag)
        except Exception as exc:  # noqa: BLE001
            self._absorb("lag_sampler", exc)
        self._stamp()
        for listener in self._listeners:
            try:
                listener(woke, lag)
            except Exception as exc:  # noqa: BLE001 - a listener is the host's code
                self._absorb("lag_listener", exc)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        interval = self.interval
        self._stamp()
        while True:
            started = loop.time()
            await asyncio.sleep(interval)
            woke = loop.time()
            lag = woke - started - interval
            if lag < 0.0:
                lag = 0.0
            self.last_lag = lag
            self.ticks += 1
            if lag > self.max_lag:
                self.max_lag = lag
            self._tick(woke, lag)
