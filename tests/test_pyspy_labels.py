"""What ``corevo-obs dump`` and the stall evidence say: a loop blocked in time.sleep is
"blocked in time.sleep", not idle; no "?" placeholder in a report; a venv inside the
project is not the project's code."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from corevo_obs.integrations.pyspy import PySpyPermissionError, dump, parse_dump
from corevo_obs.loop.causes import Caught, Window, _caught_line, _cpu_line
from corevo_obs.loop.stacks import FrameFilter

LOOP = """
import asyncio, sys, time
async def handler():
    time.sleep(30)
async def idle():
    await asyncio.sleep(30)
async def main():
    print("ready", flush=True)
    await (handler() if sys.argv[1] == "sleep" else idle())
asyncio.run(main())
"""


@pytest.fixture
def loop_proc(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[int]:
    script = tmp_path / "app.py"
    script.write_text(LOOP)
    proc = subprocess.Popen([sys.executable, str(script), request.param],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(0.3)
    yield proc.pid
    proc.kill()
    proc.wait(10)


def _loop_state(pid: int) -> str:
    try:
        d = dump(pid, 10)
    except PySpyPermissionError as exc:
        pytest.skip(f"ptrace not permitted here: {exc}")
    assert d.loop_thread is not None
    return d.format().splitlines()[1]


@pytest.mark.parametrize("loop_proc", ["sleep"], indirect=True)
def test_a_loop_in_time_sleep_is_blocked_not_idle(loop_proc: int) -> None:
    assert _loop_state(loop_proc).endswith('"MainThread" (event loop, blocked in time.sleep)')


@pytest.mark.parametrize("loop_proc", ["idle"], indirect=True)
def test_a_loop_waiting_in_its_selector_is_idle(loop_proc: int) -> None:
    assert _loop_state(loop_proc).endswith(
        '"MainThread" (event loop, idle, waiting in the selector)')


def _frame(filename: Path | str, line: int, name: str) -> dict[str, object]:
    return {"name": name, "filename": str(filename), "module": None, "line": line}


def test_a_venv_inside_the_project_is_not_project_code(tmp_path: Path) -> None:
    """The issue's case: gunicorn run from ./.venv inside the project dir; only app.py
    is the project's, not the venv's gunicorn script nor its site-packages."""
    project = tmp_path / "proj"
    venv = project / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    site = venv / "lib" / "python3.11" / "site-packages" / "gunicorn"
    app = project / "app.py"
    innermost_first = [
        _frame(site / "arbiter.py", 40, "Arbiter.sleep"),
        _frame(site / "arbiter.py", 20, "Arbiter.run"),
        _frame(venv / "bin" / "gunicorn", 8, "<module>"),
    ]
    master = {"os_thread_id": 10, "thread_name": "MainThread", "active": False,
              "owns_gil": False, "frames": innermost_first}
    worker = {**master, "os_thread_id": 11,
              "frames": [_frame(app, 15, "handler"), *innermost_first]}
    for roots in ((), (str(project),)):
        d = parse_dump(10, json.dumps([master, worker]), project_roots=roots)
        by_id = {t.thread_id: t for t in d.threads}
        assert by_id[10].culprit is None, roots
        assert by_id[11].culprit is not None and by_id[11].culprit.function == "handler"
        # the in-process filter: site-packages inside a project root is not the project
        assert FrameFilter(roots).kind(str(site / "arbiter.py")) == "library"
        assert FrameFilter(roots).kind(str(app)) == "project"


def test_the_long_stall_evidence_prints_no_placeholder() -> None:
    """A long stall may have no scheduler readings around it (the watchdog's were taken
    long before): the line says what was not measured instead of printing "over ?"."""
    bare = Window(seconds=20.0, gc=0.0, loop_ran=19.5, others_ran=0.1)
    line = _cpu_line(bare)
    assert "?" not in line
    assert "loop thread on the CPU 19.500s" in line and "not measured" in line
    full = Window(seconds=1.0, gc=0.01, loop_ran=0.2, others_ran=0.0, sched_seconds=1.1,
                  loop_waited=0.7, throttled=0.0, times_throttled=0)
    assert _cpu_line(full).endswith(
        "over 1.100s: loop thread waiting for a CPU 0.700s, cgroup throttled 0.000s (0 times)")
    no_cgroup = Window(seconds=1.0, gc=0.0, loop_ran=0.2, sched_seconds=1.0, loop_waited=0.5)
    assert "?" not in _cpu_line(no_cgroup) and "cgroup" not in _cpu_line(no_cgroup)
    assert _caught_line(Caught(syscall="running")) == "loop thread on the CPU when caught"
    assert "?" not in str(_caught_line(Caught(syscall="nanosleep")))
