"""The quick start's main job: the demo runs end to end and names each cause.

Real worker processes, real SQLite, real SIGKILL; the JSON report is the contract.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

DEMO = [sys.executable, "-m", "corevo_obs.cli.main", "demo"]


def _free_ports(n: int) -> int:
    """A base port with ``n`` consecutive free ports on loopback."""
    for base in range(42000 + os.getpid() % 1000 * 7, 60000, 97):
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port range")


def _children_of(pid: int) -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.add(int(stat.parent.name))
    return found


def _alive(pids: set[int]) -> set[int]:
    """Pids that still exist and are not zombies."""
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            alive.add(pid)
    return alive


def _wait_for(proc: subprocess.Popen[str], marker: str, timeout: float) -> str:
    """Read the demo's stderr until a line contains ``marker``; return what was read."""
    assert proc.stderr is not None
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if select.select([proc.stderr], [], [], 0.2)[0]:
            line = proc.stderr.readline()
            seen.append(line)
            if marker in line:
                return "".join(seen)
        if proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError(f"no {marker!r} in stderr:\n{''.join(seen)}")


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*DEMO, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_demo_short_json_names_each_cause_and_serves_metrics():
    port = _free_ports(3)
    proc = _start("--short", "--json", "--metrics-port", str(port))
    _wait_for(proc, "press Ctrl-C", timeout=120)
    children = _children_of(proc.pid)
    assert len(children) == 3
    for i in range(3):
        with urllib.request.urlopen(f"http://127.0.0.1:{port + i}/metrics", timeout=10) as r:
            body = r.read().decode()
        for name in ("corevo_event_loop_stalls_total", "corevo_task_dispatch_seconds_bucket",
                     "corevo_claim_total", "corevo_lease_reaped_total"):
            assert name in body, name
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert not _alive(children)
    drills = json.loads(out)["drills"]

    d1 = drills["frozen_worker"]
    # the worst stall names the injected worker (a busy CI box may starve others briefly)
    assert d1["stall"]["worker"] == d1["injected_worker"] in d1["frozen_workers"]
    culprit = d1["stall"]["culprit"]
    assert culprit["file"].endswith("corevo_obs/demo/handlers.py")
    assert culprit["function"] == "_fetch"
    others = [r for n, r in d1["workers"].items() if n != d1["injected_worker"]]
    assert all(r["heartbeat_max_gap_seconds"] < 0.3 for r in others)
    fixed = d1["workers"][d1["offloaded_worker"]]
    assert fixed["drill_seconds"] > 0.3
    assert not any((s["culprit"] or {}).get("function") == "_fetch" for s in fixed["stalls"])
    assert d1["heartbeat_age_seconds"] > 0.2 and d1["scrapes_answered_while_frozen"] >= 1

    d2 = drills["sticky_connection"]
    assert d2["short_task_owner"]["local"] == d2["gateway_worker"]
    assert d2["short_task_owner"]["claim"] in d2["idle_workers"]
    waits = d2["short_dispatch_seconds"]
    assert waits["local"] > d2["long_seconds"] / 2 > waits["claim"]
    assert d2["stage_histograms"]["dispatch"]
    assert d2["claims"][f"{d2['short_task_owner']['claim']}/won"] == 1
    rows = [r for phase in d2["phases"].values() for r in phase]
    assert all(r["first_event_at_client_seconds"] is not None for r in rows)
    assert d2["events"] == {f"{d2['gateway_worker']}/applied": 3 * len(rows)}

    d3 = drills["quota_leak"]
    assert d3["counter"]["leaked_slots"] >= 1
    assert d3["leases"]["ghost_leases"] >= 1
    assert d3["leases"]["reaped"] >= d3["leases"]["ghost_leases"]
    assert d3["leases"]["ghosts_left"] == 0
    assert d3["leases"]["free_at_end"] == d3["limit"]


def test_ctrl_c_mid_drill_stops_every_child():
    proc = _start("--short")
    _wait_for(proc, "SIGKILL w", timeout=90)  # drill 3: a holder was just killed
    time.sleep(0.5)  # ... and restarted
    children = _children_of(proc.pid)
    assert len(children) >= 2
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "interrupted" in err and "Traceback" not in err
    deadline = time.monotonic() + 5
    while _alive(children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(children)


def test_quota_drill_on_redis(redis_url, tmp_path):
    from corevo_obs.demo import drill_quota
    from corevo_obs.demo.context import DemoContext
    from corevo_obs.demo.procs import Children
    from corevo_obs.demo.progress import Progress

    (tmp_path / "metrics").mkdir()
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"))
    children = Children(tmp_path, env)
    ctx = DemoContext(2, True, tmp_path, children, Progress(1, quiet=True), None, redis_url)
    try:
        d3 = drill_quota.run(ctx)
    except Exception as exc:
        logs = "\n".join(f"--- {p.name}\n{p.read_text()}" for p in tmp_path.glob("*.log"))
        raise AssertionError(f"{exc}\n{logs}") from exc
    finally:
        children.stop()
    assert d3["backend"] == "redis"
    assert d3["leases"]["reaped"] >= 1 and d3["leases"]["ghosts_left"] == 0


@pytest.mark.parametrize(("args", "message"), [
    (["--workers", "1"], "--workers must be 2..16"),
    (["--metrics-port", "80"], "--metrics-port must leave room"),
    (["--redis", "redis://127.0.0.1:1/0"], "--redis: cannot use"),
])
def test_demo_rejects_bad_options_in_one_line(args, message):
    res = subprocess.run([*DEMO, *args], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert message in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_cli_unknown_command_is_usage_error():
    res = subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "nope"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "Traceback" not in res.stderr


def test_catalog_command_lists_every_metric():
    from corevo_obs.catalog import CATALOG

    res = subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "catalog", "--format",
                          "json"], capture_output=True, text=True, check=True)
    assert {m["name"] for m in json.loads(res.stdout)} == set(CATALOG)
