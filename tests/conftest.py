"""Shared fixtures: a fresh registry per test, and a helper to run worker scripts."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import NoReturn

import pytest
from prometheus_client import CollectorRegistry

HELPERS = Path(__file__).parent / "helpers"


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def worker_env(tmp_path: Path) -> dict[str, str]:
    """Environment for a child worker: multiprocess dir in tmp, this checkout importable."""
    mp = tmp_path / "metrics"
    mp.mkdir()
    env = dict(os.environ)
    env["PROMETHEUS_MULTIPROC_DIR"] = str(mp)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent.parent), str(HELPERS)])
    env.pop("COREVO_WORKER", None)
    return env


def helper_cmd(name: str, *args: str) -> list[str]:
    return [sys.executable, str(HELPERS / name), *args]


# --- real servers -------------------------------------------------------------------
# CI (.ci/run) starts PostgreSQL and sets COREVO_REQUIRE_SERVERS=1, which turns a missing
# server into a failure instead of a skip. Redis is started per session on a free port.

def _need(reason: str) -> NoReturn:
    if os.environ.get("COREVO_REQUIRE_SERVERS") == "1":
        pytest.fail(f"required server unavailable: {reason}")
    pytest.skip(reason)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def redis_server():
    """A private redis-server on loopback; yields its URL."""
    import shutil
    import subprocess
    import time

    exe = shutil.which("redis-server")
    if exe is None:
        _need("redis-server not installed (apt-get install redis-server)")
    port = free_port()
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    import redis

    client = redis.Redis(port=port)
    for _ in range(100):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    else:
        proc.kill()
        _need("redis-server did not start")
    client.close()
    yield f"redis://127.0.0.1:{port}/0"
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture
def redis_url(redis_server):
    """The session server, flushed for this test."""
    import redis

    client = redis.Redis.from_url(redis_server)
    client.flushall()
    client.close()
    return redis_server


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    dsn = os.environ.get("COREVO_TEST_PG_DSN")
    if not dsn:
        _need("COREVO_TEST_PG_DSN not set (source .ci/services.sh)")
    import psycopg

    try:
        psycopg.connect(dsn, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        _need(f"PostgreSQL at {dsn} not reachable: {exc}")
    return dsn
