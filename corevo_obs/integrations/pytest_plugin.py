"""pytest plugin: the "unrelated heartbeat" loop probe and the ``@blocking`` guard.

Registered as the ``corevo`` ``pytest11`` entry point, so it loads into every pytest
session where corevo-obs is installed: it imports nothing of the library until a test
asks for ``loop_probe`` or the guard is on (tests/test_imports.py checks it). The guard is
off unless ``--corevo-blocking-guard`` (or the ini key ``corevo_blocking_guard = true``)
is given. ``LoopBlocked`` (raised by the probe) lives here; ``BlockingCallError``
(raised by the guard) lives in ``corevo_obs.core.marker``.

Example::

    def test_handler_keeps_the_loop_free(loop_probe):
        async def main():
            async with loop_probe(budget=0.1):
                await handler()
        asyncio.run(main())
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import Any, Final

import pytest

from ..core.errors import ConfigError, CorevoObsError

DEFAULT_BUDGET: Final = 0.1
GUARD_HELP: Final = "make calls to @blocking functions raise on an event loop's thread"
BUDGET_HELP: Final = f"loop_probe budget in seconds (default {DEFAULT_BUDGET})"
MODULES_HELP: Final = "modules imported before the guard whose @blocking functions it wraps"

__all__ = ["LoopBlocked", "LoopProbe", "assert_loop_responsive"]  # and the loop_probe fixture


class LoopBlocked(CorevoObsError, AssertionError):
    """The loop under a probe was blocked longer than the budget; carries the reports."""

    def __init__(self, message: str, reports: list[Any]) -> None:
        self.reports = reports
        super().__init__(message)


class LoopProbe:
    """Run an unrelated heartbeat on the current loop; fail if it was blocked > ``budget``.

    A lag sampler ticks every ``interval`` and a stall watchdog (threshold ``budget / 2``,
    so the stack is caught in the act) records each stall with the blocking line. On exit
    every stall longer than ``budget`` is raised as :class:`LoopBlocked`.
    """

    def __init__(
        self,
        budget: float = DEFAULT_BUDGET,
        *,
        interval: float = 0.005,
        project_roots: Iterable[str] = (),
    ) -> None:
        if not 0.002 <= budget <= 60:
            raise ConfigError(f"loop probe budget must be within 2 ms..60 s, got {budget}")
        self.budget = budget
        self.interval = min(interval, budget / 4)
        self.project_roots = tuple(project_roots)
        self.reports: list[Any] = []
        self._health: Any = None

    async def __aenter__(self) -> LoopProbe:
        import asyncio  # here, not at import: the plugin loads into every pytest session

        from prometheus_client import CollectorRegistry

        from ..loop.health import LoopHealth, LoopHealthConfig

        config = LoopHealthConfig(
            interval=self.interval,
            stall_threshold=self.budget / 2,
            check_interval=max(0.002, min(0.02, self.budget / 10)),
            project_roots=self.project_roots,
        )
        self._health = LoopHealth(config, worker="loop-probe", registry=CollectorRegistry()).start()
        await asyncio.sleep(0)  # let the heartbeat start its first tick before the body runs
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        __tracebackhide__ = True  # pytest shows the test's line, not the probe's internals
        import asyncio
        # A stall that ended just now is known only after the heartbeat ticks again.
        await asyncio.sleep(self.interval * 3)
        await self._health.aclose()
        self.reports = [r for r in self._health.reports if r.duration > self.budget]
        if self.reports and exc_type is None:
            raise LoopBlocked(self.describe(), self.reports)

    def describe(self) -> str:
        worst = max(r.duration for r in self.reports)
        head = (
            f"event loop blocked {worst:.3f}s, budget {self.budget:.3f}s "
            f"({len(self.reports)} stall(s) over budget)"
        )
        return "\n".join([head, *(r.format() for r in self.reports)])


def assert_loop_responsive(budget: float = DEFAULT_BUDGET, *, interval: float = 0.005,
                           project_roots: Iterable[str] = ()) -> LoopProbe:
    """``async with assert_loop_responsive(0.1): ...`` outside pytest fixtures."""
    return LoopProbe(budget, interval=interval, project_roots=project_roots)


def _seconds(raw: object, source: str) -> float:
    try:
        value = float(str(raw))
    except ValueError:
        raise pytest.UsageError(f"{source}: cannot parse {raw!r} as seconds") from None
    if not 0.002 <= value <= 60:
        raise pytest.UsageError(f"{source}: {value} is outside 0.002..60 seconds")
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("corevo", "corevo-obs event loop checks")
    group.addoption("--corevo-blocking-guard", action="store_true", default=None, help=GUARD_HELP)
    group.addoption("--corevo-loop-budget", default=None, metavar="SECONDS", help=BUDGET_HELP)
    parser.addini("corevo_blocking_guard", GUARD_HELP, type="bool", default=False)
    parser.addini("corevo_loop_budget", BUDGET_HELP, default=str(DEFAULT_BUDGET))
    parser.addini("corevo_blocking_guard_modules", MODULES_HELP, type="linelist", default=[])


def _guard_requested(config: pytest.Config) -> bool:
    # During pytest_load_initial_conftests only known_args_namespace is parsed.
    flag = getattr(config.known_args_namespace, "corevo_blocking_guard", None)
    if flag is None:
        flag = config.getoption("corevo_blocking_guard", None)
    return bool(flag) if flag is not None else bool(config.getini("corevo_blocking_guard"))


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # Before conftest files and test modules import the code whose functions are marked.
    if _guard_requested(early_config):
        from ..core.marker import enable_guard

        enable_guard()


def pytest_configure(config: pytest.Config) -> None:
    if not _guard_requested(config):
        return
    from ..core.marker import enable_guard, guard_module

    enable_guard()  # when loaded with -p after the initial conftests
    for name in config.getini("corevo_blocking_guard_modules"):
        try:
            guard_module(importlib.import_module(name))
        except ImportError as exc:
            raise pytest.UsageError(f"ini corevo_blocking_guard_modules: {exc}") from None


def pytest_report_header(config: pytest.Config) -> str | None:
    return "corevo-obs: @blocking guard on" if _guard_requested(config) else None


@pytest.fixture
def loop_probe(request: pytest.FixtureRequest) -> Callable[..., LoopProbe]:
    """A factory: ``async with loop_probe(budget=0.1): ...`` fails the test on a stall."""
    cli = request.config.getoption("corevo_loop_budget", None)
    if cli is not None:
        budget = _seconds(cli, "--corevo-loop-budget")
    else:
        budget = _seconds(request.config.getini("corevo_loop_budget"), "ini corevo_loop_budget")

    def probe(budget: float = budget, *, interval: float = 0.005,
              project_roots: Iterable[str] = ()) -> LoopProbe:
        return assert_loop_responsive(budget, interval=interval, project_roots=project_roots)

    return probe
