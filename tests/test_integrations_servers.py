"""The examples' FastAPI app inside the servers users run, scraped by a real Prometheus:
gunicorn with 3 uvicorn workers (the master serves one target), and ``uvicorn --workers
2`` beside ``corevo-obs metrics serve``. Prometheus' ``sum()`` must equal what the test
caused, whatever the worker count; a SIGKILLed worker's counters are kept and its slot
name is reused, so labels stay bounded.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.apps import (
    PROMETHEUS,
    ROOT,
    app_env,
    eventually,
    get,
    prometheus,
    promql,
    python,
    scalar,
    serve,
    upstream,
    wait_port,
)
from tests.conftest import _need, free_port

ITEMS = 'sum(corevo_task_total_seconds_count{kind="GET /items/{item_id}"})'
# the planted sleeps, attributed to the code the loop ran; a busy CI box adds stalls of its
# own (the loop waiting for a CPU: "starved" or "unknown"), true but not the test's
STALLS = 'sum(corevo_event_loop_stalls_by_cause_total{cause="blocking"})'
SLEEP_LINE = next(i for i, line in enumerate(
    (ROOT / "examples" / "fastapi_app.py").read_text().splitlines(), 1)
    if "time.sleep(0.4)" in line)


def _workers(base: str) -> set[str]:
    found = promql(base, "corevo_event_loop_heartbeat_timestamp_seconds")
    return {str(r["metric"]["worker"]) for r in found}  # type: ignore[index]


def _settled(base: str, query: str, within: float = 30.0) -> float:
    """The query's value once two reads a few scrapes apart agree (stalls end, are
    written and scraped at their own pace)."""
    deadline = time.monotonic() + within
    last = scalar(base, query) or 0.0
    while True:
        time.sleep(1.5)
        now = scalar(base, query) or 0.0
        if now == last or time.monotonic() > deadline:
            return now
        last = now


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split()]


@pytest.fixture
def need_prometheus() -> None:
    if not os.access(PROMETHEUS, os.X_OK):
        _need("prometheus not installed (apt-get install prometheus)")


@pytest.mark.timeout(240)
def test_gunicorn_three_workers_one_target(tmp_path: Path, need_prometheus: None) -> None:
    mp = tmp_path / "mp"
    mp.mkdir()
    app_port, metrics_port = free_port(), free_port()
    log = tmp_path / "gunicorn.log"
    with upstream(0.05) as up:
        env = app_env(PROMETHEUS_MULTIPROC_DIR=str(mp), EXAMPLE_BLOCKING="1", UPSTREAM_URL=up,
                      BIND=f"127.0.0.1:{app_port}", WORKERS="3",
                      COREVO_METRICS_PORT=str(metrics_port), COREVO_COMPACT_EVERY="1",
                      # the planted stall is 0.4 s, above this threshold
                      COREVO_LOOP_STALL_THRESHOLD="0.25")
        cmd = python("-m", "gunicorn", "-c", "examples/gunicorn_conf.py",
                     "examples.fastapi_app:app")
        with serve(cmd, app_port, env, log) as master, \
                prometheus(tmp_path, [f"127.0.0.1:{metrics_port}"]) as prom:
            wait_port(metrics_port, master)
            assert eventually("3 named workers", lambda: _workers(prom) == {"w0", "w1", "w2"})
            for i in range(30):
                get(f"http://127.0.0.1:{app_port}/items/{i}")
            eventually("30 requests in sum()", lambda: scalar(prom, ITEMS) == 30)
            base = _settled(prom, STALLS)  # stalls of the workers' warm-up, if any
            for _ in range(4):
                get(f"http://127.0.0.1:{app_port}/report")
            # each planted stall counted once across the workers: a double count would read
            # 8 or more; a loaded box may add a blocking stall or two of its own
            eventually("4 blocking stalls in sum()",
                       lambda: 4 <= (scalar(prom, STALLS) or 0) - base < 8)
            time.sleep(2.5)  # more scrapes: a double count would show now
            assert scalar(prom, ITEMS) == 30 and 4 <= (scalar(prom, STALLS) or 0) - base < 8
            said = log.read_text(errors="replace")
            assert "stalled" in said and f"fastapi_app.py:{SLEEP_LINE}" in said, said[-3000:]

            victim = _children(master.pid)[0]
            os.kill(victim, signal.SIGKILL)
            eventually("a replacement worker", lambda: len(_children(master.pid)) == 3
                       and victim not in _children(master.pid))
            for i in range(10):
                get(f"http://127.0.0.1:{app_port}/items/{i}")
            eventually("killed worker's counts kept", lambda: scalar(prom, ITEMS) == 40)
            assert (scalar(prom, STALLS) or 0.0) >= base + 4  # the killed worker's kept (a new
            # worker's own warm-up may add one)
            eventually("the slot name reused", lambda: _workers(prom) == {"w0", "w1", "w2"})
            heartbeats = promql(prom, "corevo_event_loop_heartbeat_timestamp_seconds")
            assert len(heartbeats) == 3, "a dead worker's live gauge must not linger"


@pytest.mark.timeout(180)
def test_uvicorn_workers_beside_metrics_serve(tmp_path: Path, need_prometheus: None) -> None:
    mp = tmp_path / "mp"
    mp.mkdir()
    app_port, metrics_port = free_port(), free_port()
    env = app_env(PROMETHEUS_MULTIPROC_DIR=str(mp))
    cmd = python("-m", "uvicorn", "examples.fastapi_app:app", "--workers", "2",
                 "--port", str(app_port), "--log-level", "warning")
    serve_cmd = python("-m", "corevo_obs.cli.main", "metrics", "serve", str(mp),
                       "--port", str(metrics_port), "--compact-every", "1")
    with serve(cmd, app_port, env, tmp_path / "uvicorn.log"), \
            serve(serve_cmd, metrics_port, app_env(), tmp_path / "serve.log"), \
            prometheus(tmp_path, [f"127.0.0.1:{metrics_port}"]) as prom:
        assert eventually("2 named workers, no port clash",
                          lambda: _workers(prom) == {"w0", "w1"})
        for i in range(20):
            get(f"http://127.0.0.1:{app_port}/items/{i}")
        eventually("20 requests in sum()", lambda: scalar(prom, ITEMS) == 20)
        time.sleep(2.5)
        assert scalar(prom, ITEMS) == 20


def _stream(url: str) -> bytes:
    return get(url)


@pytest.mark.timeout(180)
def test_aiohttp_under_gunicorn_two_workers(tmp_path: Path, need_prometheus: None) -> None:
    """aiohttp's own gunicorn worker class with the same hooks: one target, named
    workers, WebSocket and streamed first events marked inside the task (none after it
    ended, the 0.1 bug of marking in on_response_prepare)."""
    import asyncio

    import websockets

    mp = tmp_path / "mp"
    mp.mkdir()
    app_port, metrics_port = free_port(), free_port()
    env = app_env(PROMETHEUS_MULTIPROC_DIR=str(mp), BIND=f"127.0.0.1:{app_port}",
                  WORKERS="2", COREVO_METRICS_PORT=str(metrics_port))
    cmd = python("-m", "gunicorn", "-c", "examples/gunicorn_conf.py",
                 "-k", "aiohttp.GunicornWebWorker", "examples.aiohttp_app:make_app()")

    async def ws(url: str) -> list[str]:
        async with websockets.connect(url) as conn:
            return [str(m) async for m in conn]

    first = 'sum(corevo_task_first_event_seconds_count{kind=~"WS /ws|GET /stream"})'
    with serve(cmd, app_port, env, tmp_path / "gunicorn.log") as master, \
            prometheus(tmp_path, [f"127.0.0.1:{metrics_port}"]) as prom:
        wait_port(metrics_port, master)
        assert eventually("2 named workers", lambda: _workers(prom) == {"w0", "w1"})
        for i in range(20):
            get(f"http://127.0.0.1:{app_port}/items/{i}")
        for _ in range(3):
            assert asyncio.run(ws(f"ws://127.0.0.1:{app_port}/ws?delay=0.05")) == [
                "event 0", "event 1", "event 2"]
            assert _stream(f"http://127.0.0.1:{app_port}/stream?delay=0.05").count(b"chunk") == 3
        eventually("20 requests in sum()", lambda: scalar(prom, ITEMS) == 20)
        eventually("6 first events in sum()", lambda: scalar(prom, first) == 6)
        time.sleep(2.5)  # more scrapes: a double count would show now
        assert scalar(prom, ITEMS) == 20 and scalar(prom, first) == 6
        errors = scalar(prom, "sum(corevo_task_mark_errors_total)")
        assert errors in (None, 0.0), f"stage marks refused: {errors}"
