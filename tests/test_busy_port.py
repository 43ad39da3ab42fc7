"""Two apps on one host, one metrics port: the second start ends with one line naming the
port and the setting to change, no traceback (gunicorn hooks and ``metrics serve``)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corevo_obs.core.errors import ConfigError, MetricsPortBusy
from corevo_obs.exposition import MetricsServer

from .apps import app_env, python
from .conftest import free_port

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def taken() -> Iterator[int]:
    """A port another process's endpoint holds (bound and listening)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_metrics_server_names_the_port_and_setting(taken: int) -> None:
    with pytest.raises(MetricsPortBusy) as info:
        MetricsServer(port=taken).start()
    assert isinstance(info.value, ConfigError) and isinstance(info.value, RuntimeError)
    text = str(info.value)
    assert f"port {taken} on 127.0.0.1 is already in use" in text
    assert "$COREVO_METRICS_PORT" in text and "\n" not in text


def test_metrics_serve_ends_with_one_line(taken: int, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "corevo_obs.cli.main", "metrics", "serve", str(tmp_path),
         "--port", str(taken)],
        capture_output=True, text=True, timeout=60, env=app_env())
    assert done.returncode != 0
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"port {taken} on 127.0.0.1 is already in use" in done.stderr
    assert "--port" in done.stderr


@pytest.mark.timeout(120)
def test_gunicorn_start_ends_with_one_line_and_no_worker(taken: int, tmp_path: Path) -> None:
    mp = tmp_path / "mp"
    mp.mkdir()
    app_port = free_port()
    env = app_env(PROMETHEUS_MULTIPROC_DIR=str(mp), BIND=f"127.0.0.1:{app_port}",
                  WORKERS="2", COREVO_METRICS_PORT=str(taken))
    done = subprocess.run(
        python("-m", "gunicorn", "-c", "examples/gunicorn_conf.py",
               "examples.fastapi_app:app"),
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "Traceback" not in out, out
    errors = [ln for ln in out.splitlines() if ln.startswith("Error:")]
    assert errors == [f"Error: metrics endpoint: port {taken} on 127.0.0.1 is already in use "
                      "(another app's metrics endpoint?); choose another port with "
                      "$COREVO_METRICS_PORT (gunicorn hooks) or MetricsServer(port=...)"], out
    assert "Booting worker" not in out, out   # it stopped before forking any worker
    with socket.socket() as probe:           # and let go of the app's port
        probe.bind(("127.0.0.1", app_port))
