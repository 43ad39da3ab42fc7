"""One call to put loop-health instrumentation on a running loop, one to take it off."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any

from prometheus_client import CollectorRegistry

from ..core.errors import ConfigError
from ..core.identity import worker_name
from .lag import DEFAULT_INTERVAL, LoopLagSampler
from .watchdog import (
    DEFAULT_CHECK_INTERVAL,
    DEFAULT_LOG_INTERVAL,
    DEFAULT_MAX_REPORTS,
    DEFAULT_STACK_FRAMES,
    DEFAULT_THRESHOLD,
    StallReport,
    StallWatchdog,
)

_ENV_PREFIX = "COREVO_LOOP_"


@dataclass
class LoopHealthConfig:
    """Settings, from keyword arguments over ``$COREVO_LOOP_*`` over defaults.

    ``watchdog=False`` keeps only the sampler and heartbeat (no side thread);
    ``stack_frames`` is how many innermost frames a stall report prints as they are
    (above them only the host's frames, library runs folded).
    """

    worker: str | None = None
    interval: float = DEFAULT_INTERVAL
    stall_threshold: float = DEFAULT_THRESHOLD
    check_interval: float = DEFAULT_CHECK_INTERVAL
    max_reports: int = DEFAULT_MAX_REPORTS
    log_interval: float = DEFAULT_LOG_INTERVAL
    watchdog: bool = True
    stack_frames: int = DEFAULT_STACK_FRAMES
    project_roots: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def resolve(cls, **overrides: Any) -> LoopHealthConfig:
        cfg = cls()
        for f in fields(cls):
            env = _ENV_PREFIX + f.name.upper()
            if env in os.environ and f.name != "worker":
                setattr(cfg, f.name, _parse(f.type, os.environ[env], f"${env}"))
        for key, value in overrides.items():
            if key not in {f.name for f in fields(cls)}:
                raise ConfigError(
                    f"unknown loop-health option {key!r}", source="install_loop_health"
                )
            if value is not None:
                setattr(cfg, key, tuple(value) if key == "project_roots" else value)
        cfg.worker = worker_name(cfg.worker)
        return cfg


def _parse(type_name: Any, raw: str, source: str) -> Any:
    kind = str(type_name)
    try:
        if kind == "float":
            return float(raw)
        if kind == "int":
            return int(raw)
        if kind == "bool":
            if raw.lower() in {"1", "true", "yes", "on"}:
                return True
            if raw.lower() in {"0", "false", "no", "off"}:
                return False
            raise ValueError(raw)
        if kind.startswith("tuple"):
            return tuple(p for p in raw.split(os.pathsep) if p)
    except ValueError:
        raise ConfigError(f"cannot parse {raw!r} as {kind}", source=source) from None
    return raw


class LoopHealth:
    """Lag sampler + heartbeat + stall watchdog on one loop.

    >>> async def main():                                   # doctest: +SKIP
    ...     async with install_loop_health(worker="w0") as health:
    ...         await serve()
    ...     print(health.watchdog.reports)
    """

    def __init__(
        self,
        config: LoopHealthConfig,
        *,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.config = config
        self.sampler = LoopLagSampler(
            interval=config.interval, worker=config.worker, registry=registry
        )
        self.watchdog: StallWatchdog | None = None
        if config.watchdog:
            self.watchdog = StallWatchdog(
                threshold=config.stall_threshold,
                check_interval=config.check_interval,
                beat_interval=config.interval,
                worker=config.worker,
                registry=registry,
                max_reports=config.max_reports,
                log_interval=config.log_interval,
                project_roots=config.project_roots,
                stack_frames=config.stack_frames,
            )
            self.sampler.add_listener(self.watchdog.beat)
        self._task: asyncio.Task[None] | None = None

    @property
    def worker(self) -> str:
        return self.sampler.worker

    @property
    def reports(self) -> list[StallReport]:
        return [] if self.watchdog is None else list(self.watchdog.reports)

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> LoopHealth:
        loop = loop or asyncio.get_running_loop()
        if self.watchdog is not None:
            self.watchdog.start(loop_thread_id=threading.get_ident(),
                                loop_native_id=threading.get_native_id())
        self._task = self.sampler.start(loop)
        self._task.add_done_callback(self._on_sampler_done)
        return self

    def _on_sampler_done(self, _task: asyncio.Task[None]) -> None:
        # The loop is shutting down (or someone cancelled the sampler): a watchdog with
        # no beats would report one endless stall, so it goes too.
        if self.watchdog is not None:
            self.watchdog.request_stop()

    async def stop(self) -> None:
        await self.sampler.stop()
        if self.watchdog is not None:
            await self.watchdog.aclose()

    async def __aenter__(self) -> LoopHealth:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


def install_loop_health(
    *,
    registry: CollectorRegistry | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
    project_roots: Iterable[str] | None = None,
    **options: Any,
) -> LoopHealth:
    """Start the sampler, heartbeat and watchdog on the running loop (or ``loop``)."""
    config = LoopHealthConfig.resolve(project_roots=project_roots, **options)
    return LoopHealth(config, registry=registry).start(loop)
