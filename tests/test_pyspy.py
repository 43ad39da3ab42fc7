"""The real py-spy binary against real processes: loop thread first, the blocking line named."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from corevo_obs import install_loop_health
from corevo_obs.integrations.pyspy import (
    NativeStallCapture,
    PySpyNotFound,
    PySpyPermissionError,
    dump,
    install_native_capture,
    locate,
)
from tests.conftest import HELPERS, helper_cmd

WORKER = str(HELPERS / "loop_worker.py")
STALL_LINE = next(
    i for i, t in enumerate(Path(WORKER).read_text().splitlines(), 1)
    if "time.sleep(ns.stall_for)" in t
)


@pytest.fixture
def stalled_worker(worker_env):
    """A real worker whose loop is frozen in time.sleep for 20 s (killed at teardown)."""
    proc = subprocess.Popen(
        helper_cmd("loop_worker.py", "w7", "--stall-after", "0.05", "--stall-for", "20",
                   "--run-for", "21"),
        env=worker_env, stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None
    json.loads(proc.stdout.readline())
    time.sleep(0.3)  # let it reach the stall
    yield proc
    proc.kill()
    proc.wait(10)


def _not_verified(what: str, message: str) -> None:
    """Sandbox without ptrace: say so in the run's summary instead of passing silently."""
    warnings.warn(f"{what} NOT verified, ptrace is forbidden here: {message}",
                  pytest.PytestWarning, stacklevel=3)


def _dump_or_report(pid: int, **kw):
    """A dump, or (sandbox without ptrace) the clear message, reported as a warning."""
    try:
        return dump(pid, 10, **kw)
    except PySpyPermissionError as exc:
        assert "ptrace not permitted" in str(exc) and str(pid) in str(exc)
        _not_verified("py-spy capture", str(exc))
        return None


def test_dump_puts_the_loop_thread_first_and_names_the_blocking_line(stalled_worker):
    d = _dump_or_report(stalled_worker.pid)
    if d is None:
        return
    first = d.threads[0]
    assert first.is_loop and first.name == "MainThread" and first.thread_id == d.pid
    assert len(d.threads) >= 2  # the stall watchdog's thread comes after
    assert not any(t.is_loop for t in d.threads[1:])
    assert first.culprit is not None
    assert os.path.realpath(first.culprit.filename) == os.path.realpath(WORKER)
    assert first.culprit.lineno == STALL_LINE
    assert f"loop_worker.py:{STALL_LINE}:main  <-- innermost project frame" in d.format()


def test_native_dump_shows_c_frames_below_the_python_line(stalled_worker):
    d = _dump_or_report(stalled_worker.pid, native=True)
    if d is None:
        return
    loop = d.loop_thread
    assert loop is not None and loop.culprit is not None and loop.culprit.lineno == STALL_LINE
    inner = loop.frames[-1]
    assert len(loop.frames) - 1 in loop.native and "sleep" in inner.function


def _cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "corevo_obs.cli.main", *args],
        capture_output=True, text=True, timeout=timeout,
    )


def test_cli_dump_prints_the_loop_thread_with_the_marked_line(stalled_worker):
    done = _cli("dump", str(stalled_worker.pid))
    if "ptrace not permitted" in done.stderr:
        _not_verified("corevo-obs dump", done.stderr.strip())
        assert done.returncode != 0 and done.stderr.count("\n") == 1
        return
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[1].startswith(f'thread {stalled_worker.pid} "MainThread" (event loop')
    assert f"loop_worker.py:{STALL_LINE}:main  <-- innermost project frame" in done.stdout
    assert "more thread(s): --all" in done.stdout
    as_json = json.loads(_cli("dump", str(stalled_worker.pid), "--json", "--all").stdout)
    assert as_json["threads"][0]["event_loop"] and len(as_json["threads"]) >= 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["abc"], "not a process id: 'abc'"),
        (["-3"], "not a process id"),
        (["1", "--timeout", "0"], "timeout must be"),
        (["999999999"], "py-spy failed on pid 999999999"),
    ],
)
def test_cli_bad_input_is_one_line_and_non_zero(args, message):
    done = _cli("dump", *args)
    assert done.returncode != 0
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("corevo-obs: error")


@pytest.fixture
def unprivileged_pyspy(tmp_path):
    """The real py-spy run as uid 65534: the kernel refuses ptrace of our processes."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root and setpriv to drop privileges")
    binary = tmp_path / "py-spy-bin"
    shutil.copy(locate(), binary)
    tmp_path.chmod(0o755)
    wrapper = tmp_path / "py-spy"
    wrapper.write_text(
        "#!/bin/sh\nexec setpriv --reuid=65534 --regid=65534 --clear-groups "
        f"{binary} \"$@\"\n"
    )
    wrapper.chmod(0o755)
    return str(wrapper)


def test_refused_ptrace_is_a_clear_error(unprivileged_pyspy, stalled_worker):
    with pytest.raises(PySpyPermissionError, match="ptrace not permitted"):
        dump(stalled_worker.pid, 10, executable=unprivileged_pyspy)


def test_missing_pyspy_is_a_clear_error(tmp_path):
    with pytest.raises(PySpyNotFound, match="py-spy not found at"):
        dump(os.getpid(), 5, executable=str(tmp_path / "nope"))


def _blocking_handler(seconds: float) -> None:
    time.sleep(seconds)  # NATIVE-CAPTURE-LINE


def _run_stalls(registry, capture: NativeStallCapture, *stalls: float,
                gap: float = 0.1) -> NativeStallCapture:
    """Real stalls, ``gap`` seconds apart, on a real loop with ``capture`` attached to its
    watchdog."""

    async def main() -> None:
        health = install_loop_health(registry=registry, worker="n0", interval=0.01)
        assert health.watchdog is not None
        capture.attach(health.watchdog)
        for seconds in stalls:
            await asyncio.sleep(gap)
            _blocking_handler(seconds)  # noqa: COB110 - the stall under test
        await asyncio.sleep(0.2)
        await health.aclose()
        capture.close()

    asyncio.run(main())
    return capture


def test_stall_capture_takes_a_native_stack_of_its_own_loop(registry, caplog):
    with caplog.at_level(logging.WARNING, logger="corevo_obs.integrations.pyspy"):
        # the second stall comes within min_interval: rate-limited
        capture = _run_stalls(registry, NativeStallCapture(min_stall=0.2, timeout=5), 0.8, 0.5)
    if capture.disabled and "ptrace" in capture.disabled:
        _not_verified("native stall capture", capture.disabled)
        assert "native stall capture disabled: py-spy cannot read" in caplog.text
        return
    assert capture.disabled is None, capture.disabled
    assert len(capture.captures) == 1 and capture.suppressed == 1
    c = capture.captures[0]
    loop = c.dump.loop_thread
    assert loop is not None and loop.thread_id == os.getpid()
    line = inspect.getsourcelines(_blocking_handler)[1] + 1
    assert loop.culprit is not None and loop.culprit.lineno == line
    assert loop.native  # C frames (clock_nanosleep) under the Python line
    assert c.report is not None and c.report.duration >= 0.7
    assert f"test_pyspy.py:{line}:_blocking_handler" in caplog.text


def test_stall_capture_without_pyspy_logs_once_and_disables(registry, caplog, tmp_path):
    missing = NativeStallCapture(min_stall=0.1, executable=str(tmp_path / "missing"))
    with caplog.at_level(logging.WARNING, logger="corevo_obs.integrations.pyspy"):
        capture = _run_stalls(registry, missing, 0.3, 0.3)
    assert capture.disabled and "py-spy not found" in capture.disabled
    assert caplog.text.count("native stall capture disabled: py-spy not found") == 1


def test_native_capture_is_off_by_default(monkeypatch, registry):
    monkeypatch.delenv("COREVO_PYSPY_MIN_STALL", raising=False)
    from corevo_obs.loop import StallWatchdog

    wd = StallWatchdog(registry=registry)
    assert install_native_capture(wd) is None
    monkeypatch.setenv("COREVO_PYSPY_MIN_STALL", "soon")
    with pytest.raises(Exception, match=r"\$COREVO_PYSPY_MIN_STALL: cannot parse 'soon'"):
        install_native_capture(wd)


def _slow_pyspy(tmp_path: Path) -> Path:
    """py-spy that starts 0.6 s late: a capture that outlasts a short stall."""
    slow = tmp_path / "slow-py-spy"
    slow.write_text(f"#!/bin/sh\nsleep 0.6\nexec {locate()} \"$@\"\n")
    slow.chmod(0o755)
    return slow


def test_a_stall_that_starts_while_py_spy_still_runs_is_captured_too(registry, tmp_path):
    # py-spy outlasts the first stall and the short gap after it: the capture thread never
    # sees the loop healthy between the two, yet the second stall is a new one
    slow = _slow_pyspy(tmp_path)
    capture = NativeStallCapture(min_stall=0.1, min_interval=0, timeout=10,
                                 executable=str(slow))
    _run_stalls(registry, capture, 0.3, 3.0, gap=0.05)
    capture.close()
    if capture.disabled and "ptrace" in capture.disabled:
        _not_verified("native stall capture", capture.disabled)
        return
    assert capture.suppressed == 0
    durations = sorted(c.report.duration for c in capture.captures if c.report is not None)
    assert len(capture.captures) == 2 and len(durations) == 2, capture.captures
    assert durations[0] < 1.0 and durations[1] > 2.5, durations  # one capture per stall


def test_a_capture_that_outlives_its_stall_is_still_paired_with_it(registry, tmp_path):
    slow = _slow_pyspy(tmp_path)
    capture = NativeStallCapture(min_stall=0.1, timeout=10, executable=str(slow))
    _run_stalls(registry, capture, 0.3)
    capture.close()
    if capture.disabled and "ptrace" in capture.disabled:
        _not_verified("native stall capture", capture.disabled)
        return
    assert len(capture.captures) == 1, capture.disabled
    c = capture.captures[0]
    assert c.report is not None and 0.25 <= c.report.duration < 0.5
