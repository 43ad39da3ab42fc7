"""The suite never counts its own start as the host's stall: a worker whose imports of
redis and psycopg are slow (a real import, slowed by a finder) builds and uses the lease
store, the cancel bus and the job store on its loop and counts no stall; the same import
made on the loop (the control) is counted. Also: a venv's script reached through a
symlinked directory is not the host's code in a real stall report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import HELPERS

pytestmark = pytest.mark.system
DELAY = 0.8


def _worker(mode: str, redis_url: str, pg: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": str(HELPERS.parent.parent),
           "SLOW_IMPORT_DELAY": str(DELAY)}
    env.pop("COREVO_WORKER", None)
    out = subprocess.run([sys.executable, str(HELPERS / "slow_backend_imports.py"), mode,
                          redis_url, pg], capture_output=True, text=True, env=env,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(json.loads(out.stdout.splitlines()[-1]))


def test_the_stores_import_their_backends_off_the_loop(redis_url: str) -> None:
    pg = os.environ.get("COREVO_TEST_PG_DSN", "")
    # a stall inside the slow import is caught in the finder's sleep (its cause may read
    # "starved" on a loaded box, where the thread also waited for a CPU: not asserted)
    control = _worker("in-loop", redis_url, pg)
    planted = [s for s in control["stalls"]  # type: ignore[union-attr, attr-defined]
               if s["in_slow_import"] and s["seconds"] >= 0.75 * DELAY]
    assert len(planted) == 1, control
    assert control["counted"] == len(control["stalls"])  # type: ignore[arg-type]
    found = _worker("top", redis_url, pg)
    stalls = found["stalls"]
    assert isinstance(stalls, list)
    assert not [s for s in stalls if s["in_slow_import"]], found
    assert found["counted"] == len(stalls)


SERVE = '''\
import asyncio, json, sys, time
sys.path.insert(0, sys.argv[1])
from handler import handler
from corevo_obs import install_loop_health


async def main():
    health = install_loop_health(worker="v0", stall_threshold=0.2, log_interval=0)
    await asyncio.sleep(0.1)
    await handler()
    await asyncio.sleep(0.3)
    await health.aclose()
    print(json.dumps([[str(f) for f in r.project_frames] for r in health.reports]))


asyncio.run(main())
'''
HANDLER = '''\
import time


async def handler():
    time.sleep(0.5)  # the host's blocking line
'''


def test_a_venv_script_through_a_symlinked_dir_is_not_a_project_frame(tmp_path: Path) -> None:
    """The issue's deploy: ``app`` is a symlink to a release holding ``venv``; the server
    runs as ``app/../venv/bin/serve`` (by name, ``app/..`` is not where the OS goes)."""
    release = tmp_path / "releases" / "r1"
    (release / "venv" / "bin").mkdir(parents=True)
    (release / "venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (release / "venv" / "bin" / "serve").write_text(SERVE)
    (release / "app").mkdir()
    (release / "app" / "handler.py").write_text(HANDLER)
    (tmp_path / "app").symlink_to(release / "app")
    script = f"{tmp_path}/app/../venv/bin/serve"
    env = {**os.environ, "PYTHONPATH": str(HELPERS.parent.parent)}
    env.pop("COREVO_WORKER", None)
    env.pop("COREVO_LOOP_PROJECT_ROOTS", None)
    out = subprocess.run([sys.executable, script, str(tmp_path / "app")], capture_output=True,
                         text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr[-3000:]
    reports = json.loads(out.stdout.splitlines()[-1])
    planted = [frames for frames in reports if any(
        f.endswith(":handler") and "handler.py" in f for f in frames)]
    assert planted, f"the planted 0.5 s stall was not reported with its line: {reports}"
    assert not [f for frames in reports for f in frames if "/venv/" in f], reports
