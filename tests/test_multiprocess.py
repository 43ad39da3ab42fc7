"""Real worker processes in prometheus_client multiprocess mode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, multiprocess
from prometheus_client.parser import text_string_to_metric_families

from corevo_obs import enable_multiprocess
from corevo_obs.core.errors import MetricsDirError

from .conftest import helper_cmd


def _spawn(env, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        helper_cmd("loop_worker.py", *args), env=env, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def _samples(text: str, name: str) -> dict[str, float]:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name:
                out[s.labels.get("worker", "")] = s.value
    return out


def test_endpoint_answers_while_loop_is_frozen(worker_env):
    proc = _spawn(worker_env, "frozen", "--serve", "--stall-after", "0.3",
                  "--stall-for", "2.5", "--run-for", "3.0")
    try:
        port = json.loads(proc.stdout.readline())["port"]
        stall_start = time.time() + 0.3  # printed before the 0.3 s sleep: an upper bound
        time.sleep(1.3)
        t0 = time.time()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
            body = resp.read().decode()
        scraped_at = time.time()
        assert scraped_at - t0 < 1.0  # answered during the freeze, not after it
        beat = _samples(body, "corevo_event_loop_heartbeat_timestamp_seconds")["frozen"]
        frozen_so_far = t0 - stall_start
        assert frozen_so_far > 0.8
        assert scraped_at - beat >= frozen_so_far - 0.05
        out, err = proc.communicate(timeout=10)
        report = json.loads(out.strip().splitlines()[-1])["reports"][0]
        assert report["culprit"]["file"].endswith("loop_worker.py")
        assert report["culprit"]["function"] == "main"
    finally:
        proc.kill()


def test_four_workers_one_stalling(worker_env):
    mp = worker_env["PROMETHEUS_MULTIPROC_DIR"]
    procs = {
        name: _spawn(worker_env, name, "--run-for", "1.2", "--wait-stdin",
                     "--stall-for", "0.6" if name == "w2" else "0")
        for name in ("w0", "w1", "w2", "w3")
    }
    try:
        for p in procs.values():
            json.loads(p.stdout.readline())
        for p in procs.values():
            json.loads(p.stdout.readline())  # loop finished, process still alive
        reg = CollectorRegistry()
        multiprocess.MultiProcessCollector(reg, path=mp)

        def value(name, **labels):
            return reg.get_sample_value(name, labels)

        for w in procs:
            count = value("corevo_event_loop_lag_seconds_count", worker=w)
            assert count and count > 20
            slow = count - value("corevo_event_loop_lag_seconds_bucket", worker=w, le="0.25")
            assert slow == (1 if w == "w2" else 0), (w, slow)
            assert value("corevo_event_loop_heartbeat_timestamp_seconds", worker=w) is not None
        assert value("corevo_event_loop_stalls_total", worker="w2") == 1
        assert not value("corevo_event_loop_stalls_total", worker="w0")

        procs["w0"].communicate("\n", timeout=10)
        assert procs["w0"].returncode == 0
        reg2 = CollectorRegistry()
        multiprocess.MultiProcessCollector(reg2, path=mp)
        beats = {
            s.labels["worker"]
            for m in reg2.collect() if m.name == "corevo_event_loop_heartbeat_timestamp_seconds"
            for s in m.samples
        }
        assert beats == {"w1", "w2", "w3"}  # the exited worker's live gauge is gone
        # its histogram stays: counters and histograms of dead workers are history
        assert reg2.get_sample_value("corevo_event_loop_lag_seconds_count", {"worker": "w0"})
    finally:
        for p in procs.values():
            p.kill()
            p.wait()


def test_unusable_metrics_dir_is_a_clear_startup_error(tmp_path):
    with pytest.raises(MetricsDirError, match="does not exist"):
        enable_multiprocess(tmp_path / "missing")
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(MetricsDirError, match="not a directory"):
        enable_multiprocess(f)


def _unwritable_dir(tmp_path: Path) -> tuple[Path, object]:
    """A directory this process cannot create files in, even as root (CI runs as root)."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    if os.geteuid() != 0:
        return ro, lambda: ro.chmod(0o755)
    if subprocess.run(["chattr", "+i", str(ro)], capture_output=True).returncode == 0:
        return ro, lambda: subprocess.run(["chattr", "-i", str(ro)], check=False)
    return Path("/sys/kernel"), lambda: None  # read-only for root as well


def test_unwritable_metrics_dir_fails_at_start_not_in_a_task(tmp_path, worker_env):
    ro, undo = _unwritable_dir(tmp_path)
    try:
        env = dict(worker_env, PROMETHEUS_MULTIPROC_DIR=str(ro))
        code = (
            "import corevo_obs, sys\n"
            "from corevo_obs.core.errors import MetricsDirError\n"
            "try:\n    corevo_obs.enable_multiprocess()\n"
            "except MetricsDirError as e:\n    print(e); sys.exit(3)\n"
        )
        res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True)
    finally:
        undo()
    assert res.returncode == 3, res.stderr
    assert "not writable" in res.stdout and str(ro) in res.stdout
    assert "Traceback" not in res.stderr


def test_pid_worker_labels_in_multiprocess_mode_are_warned_about_once(tmp_path):
    code = ("from corevo_obs import enable_multiprocess\n"
            f"enable_multiprocess({str(tmp_path)!r})\n")
    env = {k: v for k, v in os.environ.items() if k != "COREVO_WORKER"}
    bare = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=60)
    assert bare.returncode == 0, bare.stderr
    assert bare.stderr.count("$COREVO_WORKER is not set") == 1
    assert 'worker="pid' in bare.stderr
    named = subprocess.run([sys.executable, "-c", code], env={**env, "COREVO_WORKER": "w0"},
                           capture_output=True, text=True, timeout=60)
    assert named.returncode == 0 and named.stderr == "", named.stderr
