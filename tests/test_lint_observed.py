"""From production back to the lint: a real watchdog run's stall report makes a function
the lint cannot see through (a C call it does not catalogue) a blocking fact, so a second
``async def`` calling it is flagged, citing the stall."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent

WORK = '''import ctypes

_libc = ctypes.CDLL(None)


def crunch():
    _libc.usleep(400_000)  # C code: no catalogued name, no Python frame of its own
    return 1
'''
HANDLERS = "from app.work import crunch\n\n\nasync def first():\n    return crunch()\n"
OTHER = "from app.work import crunch\n\n\nasync def second():\n    crunch()\n"
RUN = '''import asyncio, json, logging, os, sys

from corevo_obs import install_loop_health
from app.handlers import first

logging.basicConfig(filename=sys.argv[1], level=logging.WARNING,
                    format="%(asctime)s %(levelname)s %(name)s: %(message)s")


async def main():
    health = install_loop_health(worker="w1", interval=0.01, project_roots=[os.getcwd()])
    await asyncio.sleep(0.1)
    await first()
    await asyncio.sleep(0.3)
    await health.aclose()
    with open(sys.argv[2], "w") as fh:  # the JSON form of the stall lines
        for r in health.reports:
            fh.write(json.dumps({"event": "stall", **r.as_dict()}) + "\\n")

asyncio.run(main())
'''


def lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "lint", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{cwd}"})


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The app, and the stall reports of one real run of it under the watchdog."""
    root = tmp_path_factory.mktemp("observed")
    for name, text in {"app/__init__.py": "", "app/work.py": WORK,
                       "app/handlers.py": HANDLERS, "app/other.py": OTHER,
                       "run.py": RUN}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    proc = subprocess.run([sys.executable, "run.py", "stall.log", "stall.jsonl"], cwd=root,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{root}"})
    assert proc.returncode == 0, proc.stderr
    log = (root / "stall.log").read_text()
    assert "stalled" in log and "work.py:7:crunch" in log, log
    return root


def test_the_lint_alone_cannot_see_the_c_call(project: Path) -> None:
    proc = lint(project, "app", "--no-cache")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("report", ["stall.log", "stall.jsonl"])
def test_a_stall_seen_in_one_handler_flags_the_other_caller(project: Path, report: str) -> None:
    proc = lint(project, "app", "--observed", report, "--format", "json", "--no-cache")
    assert proc.returncode == 1, proc.stderr
    rows = {r["path"]: r for r in json.loads(proc.stdout)}
    assert set(rows) == {"app/other.py", "app/handlers.py"}  # the second caller too
    second = rows["app/other.py"]
    assert second["code"] == "COB110" and second["line"] == 5
    assert "second -> crunch -> [seen blocking at run time]" in second["message"]
    assert "work.py:7:crunch" in second["source"] and report in second["source"]
    duration = float(second["source"].split("observed stall ")[1].split("s at")[0])
    assert 0.3 <= duration <= 5.0, second["source"]
    text = lint(project, "app", "--observed", report, "--no-cache").stdout
    assert "app/other.py:5:5: COB110" in text and "observed stall" in text


def test_baseline_records_where_a_fact_came_from(project: Path) -> None:
    proc = lint(project, "app", "--observed", "stall.log", "--baseline", "base.json",
                "--write-baseline", "--no-cache")
    assert proc.returncode == 0, proc.stderr
    entries = json.loads((project / "base.json").read_text())["entries"]
    assert {e["path"] for e in entries} == {"app/other.py", "app/handlers.py"}
    assert all("observed stall" in e["source"] and "stall.log" in e["source"]
               for e in entries)


def test_load_test_report_and_probe_output_are_read(project: Path) -> None:
    """The load-test tool's JSON (culprit file/line/function per stall) and the pytest
    probe's failure text (the watchdog's report format after its own headline)."""
    work = str(project / "app" / "work.py")
    (project / "loadtest.json").write_text(json.dumps({"stalls": [
        {"at_seconds": 3.2, "worker": "w1", "duration_seconds": 0.41, "file": work,
         "line": 7, "function": "crunch", "where": "app/work.py:7", "cause": "unknown"}]}))
    (project / "probe.txt").write_text(
        "E   corevo_obs.integrations.pytest_plugin.LoopBlocked: event loop blocked 0.402s, "
        "budget 0.100s (1 stall(s) over budget)\n"
        f"[unknown] event loop of worker w0 stalled 0.402s at {work}:7:crunch\n"
        "  project frames (innermost last):\n"
        f"    {project}/tests/test_app.py:9:test_first\n"
        f"    {work}:7:crunch\n")
    for report, cited in (("loadtest.json", "3.2s into the load test"), ("probe.txt", "")):
        rows = json.loads(lint(project, "app", "--observed", report, "--format", "json",
                               "--no-cache").stdout)
        assert {r["path"] for r in rows} == {"app/other.py", "app/handlers.py"}, report
        assert all(cited in r["source"] for r in rows)


@pytest.mark.parametrize("content", ["", "no stall here\n", '{"event": "start"}\n'])
def test_a_report_without_a_stall_is_a_one_line_error(project: Path, content: str) -> None:
    (project / "empty.log").write_text(content)
    proc = lint(project, "app", "--observed", "empty.log", "--no-cache")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "no stall found" in proc.stderr, proc.stderr
    missing = lint(project, "app", "--observed", "nope.log", "--no-cache")
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1, missing.stderr
