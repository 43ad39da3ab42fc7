"""The documented worker pool (examples/worker_pool.py) as a user runs it: a supervisor
and 2 spawned worker processes on a real SQLite job table, the pool's own metrics dir
and endpoint. Every job runs once, the workers are named job0/job1 (not the web app's
w0..), and a SIGKILLed worker's replacement takes the same name."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from corevo_obs.claims import AsyncSqliteJobStore
from tests.apps import app_env, eventually, get, python, samples, serve, value
from tests.conftest import free_port

pytestmark = pytest.mark.system
JOBS = 20


def _workers(url: str) -> set[str]:
    """The worker labels of the heartbeats the pool's endpoint serves."""
    found = samples(get(url).decode())
    return {dict(labels)["worker"] for name, labels in found
            if name == "corevo_event_loop_heartbeat_timestamp_seconds"}


def _spawned(pid: int) -> list[int]:
    """The supervisor's worker processes (multiprocessing's spawn children)."""
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    found = []
    for child in out.split():
        try:
            if "spawn_main" in Path(f"/proc/{child}/cmdline").read_text(errors="replace"):
                found.append(int(child))
        except OSError:
            pass
    return found


def _states(db: Path, ids: list[str]) -> list[str]:
    async def read() -> list[str]:
        async with AsyncSqliteJobStore(db) as jobs:
            found = [await jobs.get(i) for i in ids]
            return [j.state for j in found if j is not None]

    return asyncio.run(read())


def test_a_worker_pool_beside_a_web_app(tmp_path: Path) -> None:
    db, mp, port = tmp_path / "jobs.db", tmp_path / "jobs-metrics", free_port()
    mp.mkdir()

    async def submit() -> list[str]:
        async with AsyncSqliteJobStore(db) as jobs:
            return [await jobs.create_job(payload=str(i)) for i in range(JOBS)]

    ids = asyncio.run(submit())
    url = f"http://127.0.0.1:{port}/metrics"
    env = app_env(PROMETHEUS_MULTIPROC_DIR=str(mp))
    env.pop("COREVO_WORKER", None)
    cmd = python("-m", "examples.worker_pool", f"sqlite:///{db}", "--workers", "2",
                 "--port", str(port), "--poll", "0.05")
    with serve(cmd, port, env, tmp_path / "pool.log") as pool:
        assert eventually("all jobs completed",
                          lambda: _states(db, ids) == ["completed"] * JOBS, timeout=60)
        assert eventually("2 named workers", lambda: _workers(url) == {"job0", "job1"})
        found = samples(get(url).decode())
        assert value(found, "corevo_task_total_seconds_count", kind="job",
                     outcome="completed") == JOBS
        # a worker SIGKILLed: its replacement takes the free slot, the names stay bounded
        workers = _spawned(pool.pid)
        assert len(workers) == 2, workers
        os.kill(workers[0], signal.SIGKILL)
        eventually("the kill", lambda: workers[0] not in _spawned(pool.pid))
        # (the dead worker's series stay until compaction: a name beyond job1 would show)
        assert eventually("a replacement", lambda: len(_spawned(pool.pid)) == 2, timeout=30)
        time.sleep(1.0)
        assert _workers(url) == {"job0", "job1"}
        found = samples(get(url).decode())
        assert value(found, "corevo_task_total_seconds_count", kind="job",
                     outcome="completed") == JOBS  # the dead worker's counts are kept
