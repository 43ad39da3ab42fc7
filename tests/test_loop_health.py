"""Real stalls on a real loop: the watchdog names the blocking line and times the stall."""

from __future__ import annotations

import asyncio
import inspect
import os
import threading
import time
import warnings

import pytest

from corevo_obs import install_loop_health
from corevo_obs.errors import ConfigError
from corevo_obs.loop import LoopLagSampler

HERE = os.path.realpath(__file__)


def _line_of(func, needle: str) -> int:
    lines, start = inspect.getsourcelines(func)
    return start + next(i for i, t in enumerate(lines) if needle in t)


async def handler_sleeps(seconds: float) -> None:
    time.sleep(seconds)  # noqa: ASYNC251 BLOCKING-SLEEP


async def handler_reads_fifo(path: str) -> bytes:
    with open(path, "rb") as f:  # noqa: ASYNC230 BLOCKING-OPEN (waits for a writer)
        return f.read()


def _tolerance(seconds: float) -> float:
    return max(0.020, 0.10 * seconds)


@pytest.mark.parametrize("seconds", [0.3, 1.0])
def test_sleep_stall_names_the_line_and_duration(registry, seconds):
    async def main():
        health = install_loop_health(registry=registry, worker="t0", interval=0.01)
        await asyncio.sleep(0.1)
        await handler_sleeps(seconds)
        await asyncio.sleep(0.15)
        await health.stop()
        return health.reports

    reports = asyncio.run(main())
    assert len(reports) == 1, [r.format() for r in reports]
    r = reports[0]
    assert r.captured
    assert os.path.realpath(r.culprit.filename) == HERE
    assert r.culprit.lineno == _line_of(handler_sleeps, "BLOCKING-SLEEP")
    assert r.culprit.function == "handler_sleeps"
    assert abs(r.duration - seconds) <= _tolerance(seconds), r.duration
    assert registry.get_sample_value("corevo_event_loop_stalls_total", {"worker": "t0"}) == 1
    assert registry.get_sample_value(
        "corevo_event_loop_stall_seconds_sum", {"worker": "t0"}
    ) == pytest.approx(r.duration)
    # the lag histogram saw it too, in the right bucket
    assert registry.get_sample_value(
        "corevo_event_loop_lag_seconds_bucket", {"worker": "t0", "le": "0.1"}
    ) < registry.get_sample_value(
        "corevo_event_loop_lag_seconds_bucket", {"worker": "t0", "le": "2.5"}
    )


def test_blocking_fifo_read_is_caught(registry, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    hold = 0.4

    def writer():
        time.sleep(hold)
        with open(fifo, "wb") as f:
            f.write(b"payload")

    async def main():
        health = install_loop_health(registry=registry, worker="t1", interval=0.01)
        await asyncio.sleep(0.1)
        threading.Thread(target=writer, daemon=True).start()
        data = await handler_reads_fifo(str(fifo))
        await asyncio.sleep(0.15)
        await health.stop()
        return data, health.reports

    data, reports = asyncio.run(main())
    assert data == b"payload"
    assert len(reports) == 1
    r = reports[0]
    assert os.path.realpath(r.culprit.filename) == HERE
    assert r.culprit.lineno == _line_of(handler_reads_fifo, "BLOCKING-OPEN")
    assert abs(r.duration - hold) <= _tolerance(hold)


def test_healthy_loop_reports_nothing_and_beats(registry):
    async def main():
        health = install_loop_health(registry=registry, worker="t2", interval=0.01)
        for _ in range(30):
            await asyncio.sleep(0.01)
        await health.stop()
        return health

    before = time.time()
    health = asyncio.run(main())
    assert health.reports == []
    beat = registry.get_sample_value(
        "corevo_event_loop_heartbeat_timestamp_seconds", {"worker": "t2"}
    )
    assert before <= beat <= time.time()
    count = registry.get_sample_value("corevo_event_loop_lag_seconds_count", {"worker": "t2"})
    assert count >= 10


def test_stop_leaves_no_thread_task_or_warning(registry):
    async def main():
        health = install_loop_health(registry=registry, worker="t3", interval=0.01)
        await asyncio.sleep(0.05)
        await health.stop()
        assert health.watchdog is not None and not health.watchdog.running
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert asyncio.run(main()) == []
    assert not [t for t in threading.enumerate() if t.name.startswith("corevo-stall")]


def test_loop_closed_without_stop_takes_the_watchdog_down(registry):
    holder = {}

    async def main():
        holder["h"] = install_loop_health(registry=registry, worker="t4", interval=0.01)
        await asyncio.sleep(0.05)

    asyncio.run(main())  # asyncio.run cancels the sampler; the watchdog must follow
    time.sleep(0.2)
    assert not holder["h"].watchdog.running
    assert holder["h"].reports == []


def test_heartbeat_failure_is_absorbed_and_counted(registry, caplog):
    def broken_clock() -> float:
        raise OSError("metrics dir vanished")

    async def main():
        sampler = LoopLagSampler(worker="t5", registry=registry, interval=0.01,
                                 wall_clock=broken_clock)
        sampler.start()
        await asyncio.sleep(0.1)
        await sampler.stop()

    asyncio.run(main())
    assert registry.get_sample_value(
        "corevo_instrumentation_errors_total", {"worker": "t5", "component": "heartbeat"}
    ) >= 5
    assert registry.get_sample_value("corevo_event_loop_lag_seconds_count", {"worker": "t5"}) >= 5


def test_bad_config_is_a_clear_error(monkeypatch, registry):
    monkeypatch.setenv("COREVO_LOOP_STALL_THRESHOLD", "fast")

    async def main():
        install_loop_health(registry=registry)

    with pytest.raises(ConfigError, match=r"\$COREVO_LOOP_STALL_THRESHOLD.*'fast'"):
        asyncio.run(main())
    monkeypatch.setenv("COREVO_WORKER", "bad name!")
    monkeypatch.delenv("COREVO_LOOP_STALL_THRESHOLD")
    with pytest.raises(ConfigError, match="COREVO_WORKER"):
        asyncio.run(main())


def test_one_warning_per_stall_first_line_names_the_project_frame(registry, caplog):
    async def main():
        health = install_loop_health(registry=registry, worker="t6", interval=0.01,
                                     log_interval=60)
        await asyncio.sleep(0.05)
        await handler_sleeps(0.25)
        await asyncio.sleep(0.1)
        await handler_sleeps(0.25)  # second stall within log_interval: counted, not logged
        await asyncio.sleep(0.1)
        await health.stop()
        return health

    with caplog.at_level("WARNING", logger="corevo_obs.stall"):
        health = asyncio.run(main())
    assert len(health.reports) == 2
    records = [r for r in caplog.records if r.name == "corevo_obs.stall"]
    assert len(records) == 1
    first_line = records[0].getMessage().splitlines()[0]
    line = _line_of(handler_sleeps, "BLOCKING-SLEEP")
    assert f"test_loop_health.py:{line}:handler_sleeps" in first_line
    assert records[0].corevo_stall["culprit"]["line"] == line
