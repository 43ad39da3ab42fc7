"""Every component reads its settings through core.settings: a bad environment value is
a ConfigError naming the variable at an explicit setup call, and is counted, logged once
and replaced by its default where the code runs inside a host (server hooks, the py-spy
capture thread). One test per module, plus the lazy guard variable of ``@blocking``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from corevo_obs.core.errors import ConfigError
from corevo_obs.core.guard import reset_for_tests
from corevo_obs.integrations import gunicorn as gunicorn_hooks
from corevo_obs.integrations.pyspy import install_native_capture, locate
from corevo_obs.loop import LoopHealthConfig, StallWatchdog
from corevo_obs.mpdir.hooks import exit_threshold

ROOT = Path(__file__).resolve().parent.parent


def _errors(registry: CollectorRegistry, component: str, worker: str = "unknown") -> float:
    value = registry.get_sample_value(
        "corevo_instrumentation_errors_total", {"worker": worker, "component": component})
    return value or 0.0


# --- loop/health: explicit setup, every numeric field bounded ---------------------------
@pytest.mark.parametrize(("env", "kwargs", "needle"), [
    ({"COREVO_LOOP_CHECK_INTERVAL": "0"}, {}, "$COREVO_LOOP_CHECK_INTERVAL: 0.0 is outside"),
    ({"COREVO_LOOP_INTERVAL": "inf"}, {}, "$COREVO_LOOP_INTERVAL: must be a finite number"),
    ({"COREVO_LOOP_MAX_REPORTS": "-1"}, {}, "$COREVO_LOOP_MAX_REPORTS: -1 is outside 0.."),
    ({"COREVO_LOOP_WATCHDOG": "maybe"}, {}, "$COREVO_LOOP_WATCHDOG: cannot parse 'maybe'"),
    ({}, {"interval": 0}, "install_loop_health(interval=...): 0.0 is outside 0.001..60"),
    ({}, {"stack_frames": -2}, "install_loop_health(stack_frames=...): -2 is outside 0..1000"),
    ({}, {"log_interval": -1}, "install_loop_health(log_interval=...): -1.0 is outside 0.."),
    ({}, {"stall_treshold": 1}, "unknown option 'stall_treshold'"),
])
def test_loop_health_bad_values_name_their_source(
        monkeypatch: pytest.MonkeyPatch, env: dict[str, str], kwargs: dict[str, Any],
        needle: str) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ConfigError) as err:
        LoopHealthConfig.resolve(**kwargs)
    assert needle in str(err.value)


def test_loop_health_config_precedence_and_immutability(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    monkeypatch.setenv("COREVO_LOOP_INTERVAL", "0.05")
    monkeypatch.setenv("COREVO_LOOP_STALL_THRESHOLD", "0.3")
    monkeypatch.setenv("COREVO_LOOP_PROJECT_ROOTS", os.pathsep.join(["/srv/a", "/srv/b"]))
    monkeypatch.setenv("COREVO_LOOP_WORKER", "ignored")  # the worker is not a setting
    cfg = LoopHealthConfig.resolve(interval=0.2, stall_threshold=None)
    assert (cfg.interval, cfg.stall_threshold, cfg.project_roots) == (
        0.2, 0.3, ("/srv/a", "/srv/b"))
    assert "worker" not in {f.name for f in dataclasses.fields(cfg)}
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.interval = 1.0  # type: ignore[misc]
    assert dataclasses.replace(cfg, watchdog=False).watchdog is False and cfg.watchdog
    with pytest.raises(ConfigError) as err:  # both problems in one message
        LoopHealthConfig.resolve(interval="fast", check_interval=-1)
    assert "(interval=...)" in str(err.value) and "(check_interval=...)" in str(err.value)


# --- core/marker: read lazily, a bad value is an error at the first use -----------------
def test_bad_guard_variable_fails_at_first_use_not_at_import(tmp_path: Path) -> None:
    (tmp_path / "host_app.py").write_text(textwrap.dedent("""
        from corevo_obs import blocking

        @blocking
        def read() -> int:
            return 1
    """))
    probe = textwrap.dedent("""
        import asyncio, json, sys
        import host_app  # the host's import: must not fail on the variable
        from corevo_obs.core.errors import ConfigError
        from corevo_obs.core.marker import BlockingCallError, enable_guard, guard_enabled
        seen = {"settings_at_import": "corevo_obs.core.settings" in sys.modules}
        for name, call in (("call", host_app.read), ("check", guard_enabled)):
            try:
                call()
            except ConfigError as exc:
                seen[name] = str(exc)
        enable_guard()  # an explicit decision settles it
        async def on_loop():
            return host_app.read()
        try:
            asyncio.run(on_loop())
        except BlockingCallError:
            seen["guarded"] = True
        seen["off_loop"] = host_app.read()
        print(json.dumps(seen))
    """)
    env = dict(os.environ, COREVO_BLOCKING_GUARD="maybe",
               PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]))
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, check=True, timeout=60)
    seen = json.loads(out.stdout)
    message = "$COREVO_BLOCKING_GUARD: cannot parse 'maybe' as yes/no"
    assert seen["call"].startswith(message) and seen["check"].startswith(message)
    assert seen["guarded"] is True and seen["off_loop"] == 1
    # the marker's own import stays light: the resolver loads at the first use only
    found = subprocess.run(
        [sys.executable, "-c", "import sys, corevo_obs.core.marker; "
         "print('corevo_obs.core.settings' in sys.modules)"],
        env=env, capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    assert found == "False"


def test_good_guard_variable_turns_the_guard_on(tmp_path: Path) -> None:
    probe = ("from corevo_obs.core.marker import blocking, guard_enabled\n"
             "def f(): pass\n"
             "print(guard_enabled(), blocking(f) is f)")
    env = dict(os.environ, COREVO_BLOCKING_GUARD=" On ", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                         text=True, check=True, timeout=60)
    assert out.stdout.split() == ["True", "False"]  # on, so the marked function is wrapped


# --- mpdir/hooks: read by enable_multiprocess, an explicit setup call -------------------
@pytest.mark.parametrize(("raw", "needle"), [
    ("x", "$COREVO_COMPACT_AT_EXIT: cannot parse 'x' as a whole number"),
    ("-1", "$COREVO_COMPACT_AT_EXIT: -1 is outside 0..inf"),
    ("2.5", "$COREVO_COMPACT_AT_EXIT: cannot parse '2.5' as a whole number"),
])
def test_exit_threshold_bad_value_names_the_variable(monkeypatch: pytest.MonkeyPatch,
                                                     raw: str, needle: str) -> None:
    monkeypatch.setenv("COREVO_COMPACT_AT_EXIT", raw)
    with pytest.raises(ConfigError) as err:
        exit_threshold()
    assert str(err.value) == needle
    monkeypatch.setenv("COREVO_COMPACT_AT_EXIT", " 4 ")
    assert exit_threshold() == 4
    monkeypatch.setenv("COREVO_COMPACT_AT_EXIT", "")
    assert exit_threshold() == 16


# --- integrations/pyspy: explicit setup raises, the capture thread absorbs --------------
def test_native_capture_setup_names_the_bad_variable(monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    wd = StallWatchdog(registry=CollectorRegistry())
    monkeypatch.setenv("COREVO_PYSPY_MIN_STALL", "-1")
    with pytest.raises(ConfigError, match=r"^\$COREVO_PYSPY_MIN_STALL: -1.0 is outside"):
        install_native_capture(wd)
    monkeypatch.setenv("COREVO_PYSPY_MIN_STALL", "1")
    monkeypatch.setenv("COREVO_PYSPY", str(tmp_path / "no-py-spy"))
    with pytest.raises(ConfigError, match=r"^\$COREVO_PYSPY: py-spy not found at"):
        install_native_capture(wd)
    with pytest.raises(ConfigError, match=r"^install_native_capture\(min_stall=\.\.\.\)"):
        install_native_capture(wd, min_stall=-0.5)


def test_bad_pyspy_variable_on_the_capture_path_is_absorbed(monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    monkeypatch.setenv("COREVO_PYSPY", str(tmp_path / "no-py-spy"))
    with pytest.raises(ConfigError, match=r"^\$COREVO_PYSPY: "):
        locate()  # explicit (`corevo-obs dump`, a user's call): the error
    seen: list[ConfigError] = []
    try:
        found: str | None = locate(on_bad_env=seen.append)  # inside the host: searched
    except Exception as exc:  # noqa: BLE001 - no py-spy installed here at all
        assert "py-spy not found (pip install" in str(exc)
        found = None
    assert [e.source for e in seen] == ["$COREVO_PYSPY"]
    assert found is None or Path(found).name == "py-spy"


def test_capture_thread_counts_a_bad_pyspy_variable_and_keeps_the_host_running(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import asyncio

    from corevo_obs import install_loop_health
    from corevo_obs.integrations.pyspy import NativeStallCapture

    reset_for_tests()
    registry = CollectorRegistry()
    monkeypatch.setenv("COREVO_PYSPY", str(tmp_path / "no-py-spy"))
    # no registry=: the failure is counted under the attached watchdog's telemetry
    capture = NativeStallCapture(min_stall=0.1, min_interval=0, timeout=5)

    async def main() -> int:
        health = install_loop_health(registry=registry, worker="s0", interval=0.01)
        assert health.watchdog is not None
        capture.attach(health.watchdog)
        for n in (1, 2):
            await asyncio.sleep(0.1)
            # the stall that triggers py-spy lasts until the capture thread met the bad
            # variable (bounded): a loaded machine may run that thread late
            deadline = time.monotonic() + 10
            while _errors(registry, "pyspy-config", "s0") < n and time.monotonic() < deadline:
                time.sleep(0.01)  # noqa: ASYNC251, COB104 - the stall itself
            for _ in range(1000):  # the watchdog saw it end (10 s at most): the next is new
                if len(health.reports) >= n:
                    break
                await asyncio.sleep(0.01)
        await health.aclose()
        capture.close()
        return 7

    with caplog.at_level(logging.DEBUG, logger="corevo_obs"):
        assert asyncio.run(main()) == 7  # the host ran to its end
    assert _errors(registry, "pyspy-config", "s0") == 2  # each capture met it
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING
                and "pyspy-config" in r.getMessage()]
    assert len(warnings) == 1 and "$COREVO_PYSPY: py-spy not found at" in warnings[0].getMessage()


# --- integrations/gunicorn: server hooks absorb, defaults used ------------------------
def test_gunicorn_settings_absorb_bad_values_and_use_defaults(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    reset_for_tests()
    registry = CollectorRegistry()
    monkeypatch.setenv("COREVO_METRICS_PORT", "http")
    monkeypatch.setenv("COREVO_COMPACT_EVERY", "5")
    monkeypatch.setenv("COREVO_METRICS_HOST", "0.0.0.0")
    monkeypatch.setenv("COREVO_COMPACT_AT_EXIT", "-3")
    with caplog.at_level(logging.DEBUG, logger="corevo_obs"):
        cfg = gunicorn_hooks.master_settings(registry)
        again = gunicorn_hooks.master_settings(registry)
    assert cfg == again == gunicorn_hooks.GunicornSettings(
        compact_at_exit=16, metrics_port=9430, metrics_host="0.0.0.0", compact_every=5.0)
    assert os.environ["COREVO_COMPACT_AT_EXIT"] == "-3"  # the user's environment, as it was
    with pytest.raises(ConfigError, match=r"\$COREVO_COMPACT_AT_EXIT: -3"):
        exit_threshold()  # a worker's own enable_multiprocess() would refuse it
    assert _errors(registry, "gunicorn-config") == 2
    first = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(first) == 1  # once, with every problem of the first call in it
    assert "$COREVO_COMPACT_AT_EXIT: -3 is outside 0..inf" in first[0]
    assert "$COREVO_METRICS_PORT: cannot parse 'http' as a whole number" in first[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_gunicorn_starts_on_bad_settings_and_serves_with_defaults(tmp_path: Path) -> None:
    """A real gunicorn (2 sync workers) with our hooks, a bad janitor period and a bad
    exit threshold: it boots, every worker is named, the bad values are logged once."""
    pytest.importorskip("gunicorn")
    mp = tmp_path / "metrics"
    mp.mkdir()
    (tmp_path / "app.py").write_text(  # the worker's env and the exit threshold it uses
        "import os\nfrom corevo_obs.mpdir import hooks\n"
        "def app(environ, start_response):\n"
        "    start_response('200 OK', [('Content-Type', 'text/plain')])\n"
        "    env = os.environ.get('COREVO_COMPACT_AT_EXIT')\n"
        "    return [f\"{env} {hooks._state.get('threshold')}\".encode()]\n")
    (tmp_path / "conf.py").write_text(
        "from corevo_obs.integrations.gunicorn import child_exit, post_fork, pre_fork, "
        "when_ready\nworkers = 2\n")
    app_port, metrics_port = _free_port(), _free_port()
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(mp), COREVO_COMPACT_EVERY="soon",
               COREVO_COMPACT_AT_EXIT="x", COREVO_METRICS_PORT=str(metrics_port),
               PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)]))
    env.pop("COREVO_WORKER", None)
    log = tmp_path / "gunicorn.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", str(tmp_path / "conf.py"),
             "-b", f"127.0.0.1:{app_port}", "--no-control-socket", "app:app"],
            env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path)
    try:
        deadline, text = time.monotonic() + 30, ""
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{app_port}/", timeout=2) as r:
                    assert r.read() == b"x 16"  # env untouched, the default in use
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics",
                                            timeout=2) as r:
                    text = r.read().decode()
                if text.count("corevo_metrics_dir_files") and len(
                        list((mp / ".corevo" / "writers").iterdir())) >= 2:
                    break
            except OSError:
                pass
            assert proc.poll() is None, log.read_text()
            time.sleep(0.2)
        else:
            raise AssertionError(f"gunicorn did not serve: {log.read_text()}")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    output = log.read_text()
    assert "Worker failed to boot" not in output and "Traceback" not in output, output
    assert output.count("corevo-obs gunicorn-config failed") == 1, output
    assert "$COREVO_COMPACT_AT_EXIT: cannot parse 'x'" in output
    assert "$COREVO_COMPACT_EVERY: cannot parse 'soon'" in output
