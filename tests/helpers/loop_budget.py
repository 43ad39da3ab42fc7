"""A suite-wide loop budget (issue 24 item 4), opt-in and experimental:

    COREVO_LOOP_BUDGET=0.02 python -m pytest -p tests.helpers.loop_budget tests/...

Every event loop a test creates (``asyncio.run``, ``new_event_loop``) gets the library's
own ``LoopHealth`` (lag sampler + stall watchdog with cause attribution). A test fails
when one of its loops had a stall over the budget that the watchdog attributed to
``blocking`` (not CPU starvation, GC, another thread's GIL, throttling) and that the
library caused: the innermost frames are corevo-obs code entered through an ``await``
(or from the loop itself), not a test calling a blocking API on purpose. The failure
names the call. Stalls of other causes are counted and printed, never failed.

Not a gate: on the shared 2-core box under load (load average 17-21) it still blamed
the library for 20-30 ms "stalls" that were CPU bursts of 200 concurrent claims resumed
in one loop turn, or GIL waits behind a descheduled thread that look like a blocking
futex wait (``_gil_wait`` drops the latter, and with them real lock waits). See the
session report of issue 24.
"""

from __future__ import annotations

import asyncio
import linecache
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

LIBRARY = str(Path(__file__).resolve().parents[2] / "corevo_obs") + os.sep
TESTS = str(Path(__file__).resolve().parents[1]) + os.sep
_healths: list[Any] = []
_other: list[str] = []


def _budget() -> float:
    return float(os.environ.get("COREVO_LOOP_BUDGET") or 0.02)


def _attach(loop: asyncio.AbstractEventLoop) -> None:
    from prometheus_client import CollectorRegistry

    from corevo_obs.loop.health import LoopHealth, LoopHealthConfig

    budget = _budget()
    config = LoopHealthConfig(interval=min(0.005, budget / 4),
                              stall_threshold=budget / 2, check_interval=0.002,
                              project_roots=(LIBRARY, TESTS))
    try:
        _healths.append(LoopHealth(config, worker="suite-probe",
                                   registry=CollectorRegistry()).start(loop))
    except Exception as exc:  # noqa: BLE001 - the probe must never break a test
        _other.append(f"probe not attached: {exc!r}")


class _Policy(asyncio.DefaultEventLoopPolicy):
    def new_event_loop(self) -> asyncio.AbstractEventLoop:
        loop = super().new_event_loop()
        loop.call_soon(_attach, loop)
        return loop


def library_caused(frames: tuple[Any, ...]) -> Any | None:
    """The library frame to blame, or None: the outermost frame of the innermost run of
    corevo-obs frames, when its caller is the loop or an ``await`` (a test that calls a
    blocking API itself is the test's choice)."""
    inner = [i for i, f in enumerate(frames) if f.filename.startswith(LIBRARY)]
    if not inner:
        return None
    i = inner[-1]
    while i > 0 and frames[i - 1].filename.startswith(LIBRARY):
        i -= 1
    caller = frames[i - 1] if i > 0 else None
    if caller is not None and caller.filename.startswith(TESTS):
        line = linecache.getline(caller.filename, caller.lineno)
        if "await " not in line:
            return None
    return frames[inner[-1]]


def pytest_configure(config: pytest.Config) -> None:
    asyncio.set_event_loop_policy(_Policy())


def _gil_wait(report: Any) -> bool:
    """Caught waiting in a futex while hardly on the CPU: on an overloaded host that is
    most often the GIL, held by a thread of ours that is itself waiting for a CPU (its
    run delay is not the loop thread's, so ``causes`` cannot call it starved)."""
    on_cpu = report.measures.get("loop_cpu_seconds", 0.0)
    return any("in futex" in e for e in report.evidence) and on_cpu < report.duration / 2


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    _healths.clear()
    result = yield
    budget = _budget()
    blamed = []
    for health in _healths:
        for r in health.reports:
            if r.duration <= budget:
                continue
            blame = r.cause == "blocking" and not _gil_wait(r)
            culprit = library_caused(r.frames) if blame else None
            if culprit is None:
                cause = "gil wait" if r.cause == "blocking" and _gil_wait(r) else r.cause
                _other.append(f"{item.nodeid}: {r.duration * 1000:.0f} ms {cause} "
                              f"at {r.where}")
            else:
                blamed.append(f"{r.duration * 1000:.0f} ms blocking in {culprit}")
    if blamed:
        pytest.fail(f"the library stalled the loop past {budget * 1000:.0f} ms: "
                    + "; ".join(blamed), pytrace=False)
    return result


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _other:
        terminalreporter.write_line(f"loop budget: {len(_other)} stall(s) not blamed on "
                                    "the library:")
        for line in _other[:30]:
            terminalreporter.write_line("  " + line)
