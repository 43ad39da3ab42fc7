"""One call to put loop-health instrumentation on a running loop, one to take it off."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from prometheus_client import CollectorRegistry

from ..core.lifecycle import AsyncService, astops, starts
from ..core.settings import option, resolve
from ..core.telemetry import HasTelemetry, Telemetry
from .lag import DEFAULT_INTERVAL, LoopLagSampler
from .utilization import LoopUtilization
from .watchdog import (
    DEFAULT_CHECK_INTERVAL,
    DEFAULT_LOG_INTERVAL,
    DEFAULT_MAX_REPORTS,
    DEFAULT_ONGOING_AFTER,
    DEFAULT_STACK_FRAMES,
    DEFAULT_THRESHOLD,
    LOG_FORMATS,
    StallReport,
    StallWatchdog,
)

ENV_PREFIX: Final = "COREVO_LOOP"


@dataclass(frozen=True)
class LoopHealthConfig:
    """Settings: keyword argument > ``$COREVO_LOOP_<NAME>`` > default, each checked once.

    ``watchdog=False`` keeps only the sampler and heartbeat (no side thread);
    ``utilization=False`` leaves the loop's selector untimed (no busy-seconds series);
    ``stack_frames`` is how many innermost frames a stall report prints as they are
    (above them only the host's frames, library runs folded). A stall still going on
    after ``ongoing_after`` seconds is logged at once and again at doubling ages;
    ``log_format="json"`` makes each stall record one JSON line. Who reports is not a
    setting: ``LoopHealth`` / ``install_loop_health`` take ``worker=`` and ``registry=`` as
    every component does. A bad value is a ``ConfigError`` naming its source; the
    config is immutable (``dataclasses.replace`` makes a changed copy).

    >>> LoopHealthConfig.resolve(interval=0.05).interval
    0.05
    >>> from corevo_obs.core.errors import ConfigError
    >>> try:
    ...     LoopHealthConfig.resolve(stall_threshold=0)
    ... except ConfigError as exc:
    ...     print(exc)
    install_loop_health(stall_threshold=...): 0.0 is outside 0.001..3600
    """

    interval: float = option(DEFAULT_INTERVAL, minimum=0.001, maximum=60)
    stall_threshold: float = option(DEFAULT_THRESHOLD, minimum=0.001, maximum=3600)
    check_interval: float = option(DEFAULT_CHECK_INTERVAL, minimum=0.001, maximum=60)
    max_reports: int = option(DEFAULT_MAX_REPORTS, minimum=0, maximum=100_000)
    log_interval: float = option(DEFAULT_LOG_INTERVAL, minimum=0, maximum=86_400)
    watchdog: bool = option(True)
    stack_frames: int = option(DEFAULT_STACK_FRAMES, minimum=0, maximum=1000)
    project_roots: tuple[str, ...] = option(())
    ongoing_after: float = option(DEFAULT_ONGOING_AFTER, minimum=0, maximum=3600)
    log_format: str = option("text", choices=LOG_FORMATS)
    utilization: bool = option(True)

    @classmethod
    def resolve(cls, *, caller: str = "install_loop_health",
                **overrides: Any) -> LoopHealthConfig:
        """The config ``install_loop_health(**overrides)`` would use (None = not given)."""
        return resolve(cls, ENV_PREFIX, caller=caller, **overrides)


class LoopHealth(HasTelemetry, AsyncService):
    """Lag sampler + heartbeat + stall watchdog on one loop.

    >>> from prometheus_client import CollectorRegistry
    >>> async def main() -> list[StallReport]:
    ...     async with install_loop_health(worker="w0", registry=CollectorRegistry()) as health:
    ...         await asyncio.sleep(0.05)  # serve requests here
    ...     return health.reports
    >>> asyncio.run(main())  # nothing blocked the loop: no stall reports
    []
    """

    def __init__(
        self,
        config: LoopHealthConfig,
        *,
        worker: str | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._telemetry = t = Telemetry.resolve(worker, registry)
        self.config = config
        self.sampler = LoopLagSampler(interval=config.interval, worker=t.worker,
                                      registry=t.registry)
        self.utilization = LoopUtilization(worker=t.worker, registry=t.registry)
        self.sampler.add_listener(self.utilization.beat)
        self.watchdog: StallWatchdog | None = None
        if config.watchdog:
            self.watchdog = StallWatchdog(
                threshold=config.stall_threshold,
                check_interval=config.check_interval,
                beat_interval=config.interval,
                worker=t.worker,
                registry=t.registry,
                max_reports=config.max_reports,
                log_interval=config.log_interval,
                project_roots=config.project_roots,
                stack_frames=config.stack_frames,
                ongoing_after=config.ongoing_after,
                log_format="json" if config.log_format == "json" else "text",
            )
            self.sampler.add_listener(self.watchdog.beat)
        self._task: asyncio.Task[None] | None = None

    @property
    def reports(self) -> list[StallReport]:
        return [] if self.watchdog is None else list(self.watchdog.reports)

    def _is_running(self) -> bool:
        """True while the sampler runs (the watchdog ends with it)."""
        return self.sampler._is_running()

    @starts
    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Start the sampler and the watchdog on the running loop (or ``loop``); returns
        ``self``. Started once: a second start or an ``async with`` after it starts nothing."""
        loop = loop or asyncio.get_running_loop()
        if self.watchdog is not None:
            self.watchdog.start(loop_thread_id=threading.get_ident(),
                                loop_native_id=threading.get_native_id(), loop=loop)
        if self.config.utilization:
            self.utilization.start(loop)
        self.sampler.start(loop)
        self._task = self.sampler._task
        assert self._task is not None
        self._task.add_done_callback(self._on_sampler_done)

    def _on_sampler_done(self, _task: asyncio.Task[None]) -> None:
        # The loop is shutting down (or someone cancelled the sampler): a watchdog with
        # no beats would report one endless stall, so it goes too.
        self.utilization.close()
        if self.watchdog is not None:
            self.watchdog._request_stop()

    @astops
    async def aclose(self) -> None:
        """Stop the sampler and the watchdog; safe to call twice."""
        await self.sampler.aclose()
        self.utilization.close()
        if self.watchdog is not None:
            await self.watchdog.aclose()



def install_loop_health(
    *,
    worker: str | None = None,
    registry: CollectorRegistry | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
    project_roots: Iterable[str] | None = None,
    interval: float | None = None,
    stall_threshold: float | None = None,
    check_interval: float | None = None,
    max_reports: int | None = None,
    log_interval: float | None = None,
    watchdog: bool | None = None,
    stack_frames: int | None = None,
    ongoing_after: float | None = None,
    log_format: str | None = None,
    utilization: bool | None = None,
) -> LoopHealth:
    """Start the sampler, heartbeat and watchdog on the running loop (or ``loop``).

    ``worker`` (default ``$COREVO_WORKER`` or ``pid<N>``) labels the series written to
    ``registry`` (default: prometheus_client's global registry). The other options are
    ``LoopHealthConfig``'s fields; None (the default) means ``$COREVO_LOOP_<NAME>`` or
    else the field's default.
    """
    telemetry = Telemetry.resolve(worker, registry)  # a bad worker fails before the config
    config = LoopHealthConfig.resolve(
        project_roots=project_roots, interval=interval, stall_threshold=stall_threshold,
        check_interval=check_interval, max_reports=max_reports, log_interval=log_interval,
        watchdog=watchdog, stack_frames=stack_frames, ongoing_after=ongoing_after,
        log_format=log_format, utilization=utilization)
    return LoopHealth(config, worker=telemetry.worker, registry=telemetry.registry).start(loop)
