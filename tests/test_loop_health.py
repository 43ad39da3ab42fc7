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
from corevo_obs.core.errors import ConfigError
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
        await health.aclose()
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


def test_a_stall_right_after_install_is_recorded_like_any_other(registry, caplog):
    """Before the sampler's first tick (an import right after install): announced while
    it lasts, then in the reports, the count and the histogram."""
    async def main():
        health = install_loop_health(registry=registry, worker="t0", interval=0.01,
                                     log_interval=60)
        await handler_sleeps(1.2)  # no await between install and the stall
        await asyncio.sleep(0.15)
        await health.aclose()
        return health.reports

    with caplog.at_level("WARNING", logger="corevo_obs.stall"):
        reports = asyncio.run(main())
    ongoing = [r for r in caplog.records if r.corevo_stall["ongoing"]]
    assert ongoing, "the stall was not announced while it lasted"
    planted = [r for r in reports if r.duration >= 1.0]  # a loaded box may add short ones
    assert len(planted) == 1, [r.format() for r in reports]
    r = planted[0]
    assert r.culprit is not None and r.culprit.function == "handler_sleeps"
    assert abs(r.duration - 1.2) <= _tolerance(1.2), r.duration
    count = len(reports)
    assert registry.get_sample_value("corevo_event_loop_stalls_total", {"worker": "t0"}) == count
    assert registry.get_sample_value(
        "corevo_event_loop_stall_seconds_count", {"worker": "t0"}) == count
    assert registry.get_sample_value(
        "corevo_event_loop_stall_seconds_sum", {"worker": "t0"}) == pytest.approx(
        sum(x.duration for x in reports))


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
        await health.aclose()
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
        await health.aclose()
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
        await health.aclose()
        assert health.watchdog is not None and not health.watchdog.running
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert asyncio.run(main()) == []
    # not running (above) is its last word; leaving threading.enumerate() takes a moment
    # more, which a loaded box stretches (load 44: still listed right after aclose)
    for _ in range(1000):
        if not [t for t in threading.enumerate() if t.name.startswith("corevo-stall")]:
            break
        time.sleep(0.01)
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
        for _ in range(3000):  # 5 ticks: 50 ms when idle, however long a loaded box takes
            if sampler.ticks >= 5:
                break
            await asyncio.sleep(0.01)
        await sampler.aclose()

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
        await health.aclose()
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


# --- readable reports and the causes' arithmetic -------------------------------------
def test_report_leads_with_cause_then_project_frames_then_a_trimmed_stack(
        monkeypatch, registry):
    monkeypatch.setenv("COREVO_LOOP_STACK_FRAMES", "2")

    async def main():
        health = install_loop_health(registry=registry, worker="t7", interval=0.01)
        assert health.config.stack_frames == 2
        await asyncio.sleep(0.1)
        await handler_sleeps(0.3)
        await asyncio.sleep(0.15)
        await health.aclose()
        return health.reports

    (r,) = asyncio.run(main())
    line = _line_of(handler_sleeps, "BLOCKING-SLEEP")
    text = r.format().splitlines()
    assert r.cause == "blocking"
    assert text[0] == (f"[blocking] event loop of worker t7 stalled {r.duration:.3f}s at "
                       f"{r.culprit}") and f":{line}:handler_sleeps" in text[0]
    assert text[1].startswith("  why: the loop thread waited in clock_nanosleep")
    assert text.index("  project frames (innermost last):") < next(
        i for i, t in enumerate(text) if t.startswith("  stack ("))
    assert any(t.strip().startswith("… ") and "library frames …" in t for t in text)
    assert len(text) < len(r.frames) + 8  # folded: shorter than the raw stack
    d = r.as_dict()
    assert d["cause"] == "blocking" and d["frames"] == [str(f) for f in r.frames]
    assert d["project_frames"][-1].endswith(f":{line}:handler_sleeps")
    assert d["measures"]["loop_cpu_seconds"] < 0.5 * r.duration  # asleep, not on the CPU
    assert registry.get_sample_value("corevo_event_loop_stalls_by_cause_total",
                                     {"worker": "t7", "cause": "blocking"}) == 1
    monkeypatch.setenv("COREVO_LOOP_STACK_FRAMES", "many")
    with pytest.raises(ConfigError, match=r"\$COREVO_LOOP_STACK_FRAMES.*'many'"):
        asyncio.run(main())


def test_frame_filter_needs_project_roots_for_the_suites_own_demo():
    from corevo_obs.loop.stacks import FrameFilter, FrameInfo

    demo = os.path.join(os.path.dirname(corevo_obs_file()), "demo", "handlers.py")
    assert FrameFilter().kind(demo) == "library"  # no hard-coded host dirs any more
    rooted = FrameFilter.resolved([os.path.dirname(demo)])
    assert rooted.kind(demo) == "project" and rooted.kind(HERE) == "library"
    assert FrameFilter().kind("<frozen importlib._bootstrap>") == "import"
    stack = [FrameInfo(HERE, 1, "outer"), FrameInfo("<frozen importlib._bootstrap>", 2, "x"),
             FrameInfo("<frozen importlib._bootstrap>", 3, "y"), FrameInfo(HERE, 9, "<module>")]
    assert FrameFilter().importing_frame(stack) == stack[0]
    assert FrameFilter().imported_module(stack) == stack[3]
    assert FrameFilter().trimmed(stack, 0) == [str(stack[0]), "… 2 import-machinery frames …",
                                              str(stack[3])]


def corevo_obs_file() -> str:
    import corevo_obs

    return corevo_obs.__file__


def _window(**kw):
    from corevo_obs.loop.causes import Window

    base = {"seconds": 0.22, "gc": 0.0, "loop_ran": 0.0, "others_ran": 0.0,
            "sched_seconds": 0.3, "loop_waited": 0.0, "throttled": 0.0}
    return Window(**(base | kw))


@pytest.mark.parametrize(("window", "stack", "cause"), [
    ({"loop_waited": 0.19}, "idle", "starved"),
    ({"loop_waited": 0.2, "throttled": 0.18, "times_throttled": 1}, "code", "throttled"),
    ({"loop_waited": 0.2, "times_throttled": 2}, None, "throttled"),   # not yet accounted
    ({"gc": 0.19, "loop_ran": 0.2}, "code", "gc"),
    ({"others_ran": 0.2}, None, "gil"),
    ({"others_ran": 0.2}, "idle", "gil"),
    ({"others_ran": 0.2}, "code", "blocking"),     # asleep in code while a thread works
    ({"loop_ran": 0.19, "loop_waited": 0.05}, "code", "blocking"),  # slowed, still code
    ({"loop_ran": 0.19}, None, "blocking"),        # C code held the GIL: no stack
    ({}, "idle", "unknown"),                       # e.g. SIGSTOP: nothing ran, nobody waited
])
def test_attribution_from_readings(window, stack, cause):
    from corevo_obs.loop.causes import Caught, attribute
    from corevo_obs.loop.stacks import FrameFilter, FrameInfo

    sel = FrameInfo(os.path.join(os.path.dirname(asyncio.__file__), "..", "selectors.py"),
                    1, "select")
    sel = FrameInfo(os.path.realpath(sel.filename), 1, "select")
    code = FrameInfo(HERE, 5, "handler")
    samples = {"idle": ((sel,),), "code": ((code,),), None: ()}[stack]
    got = attribute(0.2, _window(**window), Caught(samples=samples), FrameFilter())
    assert got.cause == cause, got
    if cause == "blocking" and stack == "code":
        assert got.culprit == code
    if stack == "idle":
        assert got.culprit is None  # asyncio.run's caller is no culprit


def test_gil_holder_on_a_loaded_machine_counts_its_wait_for_a_cpu():
    """A thread holding the GIL keeps it while queued for a CPU: on a loaded machine it
    runs a fraction of the stall and waits the rest, and is still what held the loop."""
    from corevo_obs.loop.causes import BusyThread, Caught, attribute
    from corevo_obs.loop.stacks import FrameFilter

    window = _window(others_ran=0.2)
    loaded = BusyThread("busy", 7, cpu_seconds=0.05, waited_seconds=0.18, over_seconds=0.3)
    got = attribute(0.25, window, Caught(), FrameFilter(), loaded)
    assert got.cause == "gil" and got.blocker == loaded
    assert got.summary == ("thread 'busy' ran 0.050s and waited 0.180s for a CPU in the "
                           "last 0.300s while the loop thread waited for the GIL")
    idle = BusyThread("idle", 8, cpu_seconds=0.05, over_seconds=0.3)  # barely ran
    got = attribute(0.25, window, Caught(), FrameFilter(), idle)
    assert got.cause == "gil" and got.blocker is None
    # measured over less than the stall (a look taken during it): judged on that span
    early = BusyThread("busy", 7, cpu_seconds=0.04, over_seconds=0.1)
    assert attribute(0.25, window, Caught(), FrameFilter(), early).blocker == early
    # the process's CPU alone (0.05s of 0.25s) does not say gil; the holder's run delay,
    # measured over a span about the stall's, does ...
    starved_holder = _window(others_ran=0.05)
    got = attribute(0.25, starved_holder, Caught(), FrameFilter(), loaded)
    assert got.cause == "gil" and got.blocker == loaded
    assert attribute(0.25, starved_holder, Caught(), FrameFilter()).cause == "unknown"
    # ... but not a pool thread's hour of work since a look an hour ago
    pool = BusyThread("pool", 9, cpu_seconds=40.0, waited_seconds=5.0, over_seconds=3600)
    assert attribute(0.25, starved_holder, Caught(), FrameFilter(), pool).cause == "unknown"


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_busiest_thread_is_named_with_the_span_it_was_measured_over():
    from corevo_obs.loop.causes import ThreadLook, busiest_thread

    look = ThreadLook()
    look.take(time.monotonic)
    stop, spun = threading.Event(), threading.Event()

    def spin() -> None:  # says when it has had 0.1 s of CPU: a loaded box takes longer
        start = time.thread_time()
        while not stop.is_set():
            sum(range(1000))
            if time.thread_time() - start >= 0.1:
                spun.set()

    t = threading.Thread(target=spin, name="spinner")
    t.start()
    try:
        time.sleep(0.3)
        assert spun.wait(60)
        found = busiest_thread(look, time.monotonic, [threading.get_native_id()])
    finally:
        stop.set()
        t.join()
    assert found is not None and found.name == "spinner" and found.native_id == t.native_id
    assert found.over_seconds is not None and 0.3 <= found.over_seconds < 61
    # one thread runs at most the wall-clock span, and did run for a good part of it
    assert 0.05 < found.cpu_seconds <= found.over_seconds + 0.01
    assert any(f.function == "spin" for f in found.frames)
    # the look was retaken: a second one right after sees nothing busy
    again = busiest_thread(look, time.monotonic, [threading.get_native_id()])
    assert again is None or again.held_seconds < 0.05


def test_cgroup_files_found_from_proc_files_for_v1_and_v2(tmp_path):
    from corevo_obs.loop.cgroup import cpu_stat_files, throttled

    for version, line, mount, stat in [
        ("v2", "0::/app/web", "cgroup2 cgroup2 rw", b"usage_usec 5\nnr_throttled 3\n"
                                                    b"throttled_usec 2500\n"),
        ("v1", "4:cpu,cpuacct:/app/web", "cgroup cgroup rw,cpu,cpuacct",
         b"nr_periods 9\nnr_throttled 3\nthrottled_time 2500000\n"),
    ]:
        root = tmp_path / version
        leaf = root / "app" / "web"
        leaf.mkdir(parents=True)
        (leaf / "cpu.stat").write_bytes(stat)
        (root / "app" / "cpu.stat").write_bytes(b"usage_usec 1\n")  # no throttle fields
        (tmp_path / f"{version}.cgroup").write_text(f"{line}\n")
        (tmp_path / f"{version}.mountinfo").write_text(
            f"30 25 0:26 / {root} rw,nosuid - {mount}\n")
        found = cpu_stat_files(str(tmp_path / f"{version}.cgroup"),
                               str(tmp_path / f"{version}.mountinfo"))
        assert found == (str(leaf / "cpu.stat"),), version
        assert throttled([stat]) == (2_500_000, 3), version
    assert throttled([b"usage_usec 1\n", None]) is None
    assert cpu_stat_files(str(tmp_path / "missing"), str(tmp_path / "missing")) == ()
