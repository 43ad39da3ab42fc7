"""The quick start's main job: the demo runs end to end and names each cause.

Real worker processes, real SQLite, real SIGKILL; the JSON report is the contract.
"""

from __future__ import annotations

import inspect
import json
import os
import re
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
    """The demo as a terminal starts it: with SIGINT at its default even when the test run
    was started in the background (a shell's ``&`` leaves SIGINT ignored, and Python then
    installs no KeyboardInterrupt handler, so the Ctrl-C these tests send would be lost)."""
    return subprocess.Popen([*DEMO, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_default_sigint)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _workdir(stderr: str) -> Path:
    """The demo's temp dir, from its first progress line."""
    match = re.search(r"work dir (\S+)", stderr)
    assert match, stderr
    return Path(match.group(1))


def _line_of(func: object, needle: str) -> int:
    """The line number of the first line of ``func`` containing ``needle``."""
    lines, first = inspect.getsourcelines(func)  # type: ignore[arg-type]
    return first + next(i for i, text in enumerate(lines) if needle in text)


def check_frozen(d1: dict) -> None:
    """Drill 1 names the injected worker and the exact blocking line and its caller."""
    from corevo_obs.demo import handlers

    freeze = d1["freeze_seconds"]
    bad = d1["injected_worker"]
    # the worst stall names the injected worker (a busy CI box may starve others briefly)
    assert d1["stall"]["worker"] == bad and bad in d1["frozen_workers"]
    assert d1["stall"]["duration_seconds"] >= 0.9 * freeze
    culprit = d1["stall"]["culprit"]
    assert culprit["file"].endswith("corevo_obs/demo/handlers.py")
    blocking = _line_of(handlers._fetch, "urlopen(")
    assert (culprit["function"], culprit["line"]) == ("_fetch", blocking)
    caller = _line_of(handlers.persist_artifact_blocking, "_fetch(url)")
    assert d1["call_chain"][-2].endswith(f"handlers.py:{caller}:persist_artifact_blocking")
    assert d1["max_lag_seconds"] >= 0.9 * freeze
    # the gauge went stale while the endpoint kept answering
    assert d1["heartbeat_age_seconds"] > freeze / 2 and d1["scrapes_answered_while_frozen"] >= 1
    workers = d1["workers"]
    assert workers[bad]["heartbeat_max_gap_seconds"] >= 0.9 * freeze
    assert all(r["heartbeat_max_gap_seconds"] < freeze / 2 for n, r in workers.items() if n != bad)
    # ... while the model's latency did not move (its median is far below the freeze)
    assert workers[bad]["model_latency_median_seconds"] < freeze / 4
    fixed = workers[d1["offloaded_worker"]]
    assert fixed["drill_seconds"] >= 0.9 * freeze and fixed["max_lag_seconds"] < freeze / 2
    assert not any((s["culprit"] or {}).get("function") == "_fetch" for s in fixed["stalls"])


def check_sticky(d2: dict) -> None:
    """Drill 2: local-only waits behind the long task on the gateway; an idle worker claims."""
    gateway, owner = d2["gateway_worker"], d2["short_task_owner"]
    assert owner["local"] == gateway and owner["claim"] in d2["idle_workers"]
    assert [r["executed_by"] for r in d2["phases"]["local"]] == [gateway, gateway]
    assert [r["executed_by"] for r in d2["phases"]["claim"]] == [gateway, owner["claim"]]
    local_short, claim_short = d2["phases"]["local"][1], d2["phases"]["claim"][1]
    half = d2["long_seconds"] / 2
    assert local_short["queue_wait_seconds"] > half > claim_short["queue_wait_seconds"]
    assert local_short["dispatch_seconds"] > half > claim_short["dispatch_seconds"]
    assert d2["claims"][f"{owner['claim']}/won"] == 1
    assert d2["dispatch_paths"] == {f"{gateway}/local": 3, f"{gateway}/queued": 1}
    assert d2["stage_histograms"]["dispatch"][f"{owner['claim']}/short"]["count"] == 1
    rows = [r for phase in d2["phases"].values() for r in phase]
    assert all(r["state"] == "completed" for r in rows)
    assert all(r["first_event_at_client_seconds"] is not None for r in rows)
    assert d2["events"] == {f"{gateway}/applied": 3 * len(rows)}


def check_quota(d3: dict) -> None:
    """Drill 3: the counter leaks for good, the leases' ghosts are reaped, capacity returns."""
    assert d3["counter"]["leaked_slots"] >= 1
    assert d3["counter"]["free_at_end"] == d3["limit"] - d3["counter"]["leaked_slots"]
    assert d3["leases"]["ghost_leases"] >= 1
    assert d3["leases"]["reaped"] >= d3["leases"]["ghost_leases"]
    assert d3["leases"]["ghosts_left"] == 0 and d3["leases"]["free_at_end"] == d3["limit"]
    assert any(s["lease_ghosts"] for s in d3["timeline"])  # ghosts were seen, then gone
    assert d3["timeline"][-1]["lease_ghosts"] == 0


def test_demo_short_json_names_each_cause_and_serves_metrics():
    port = _free_ports(3)
    proc = _start("--short", "--json", "--metrics-port", str(port))
    err = _wait_for(proc, "press Ctrl-C", timeout=120)
    children = _children_of(proc.pid)
    assert len(children) == 3
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        body = r.read().decode()  # one endpoint for the host: every drill, every worker
    for name in ("corevo_event_loop_stalls_total", "corevo_task_dispatch_seconds_bucket",
                 "corevo_claim_total", "corevo_lease_reaped_total"):
        assert name in body, name
    beats = [line for line in body.splitlines()
             if line.startswith("corevo_event_loop_heartbeat_timestamp_seconds{")]
    assert len(beats) == 3, "each of the 3 serving workers exactly once"
    for i in (1, 2):  # the others serve nothing: a second target would count them twice
        with pytest.raises(OSError):
            urllib.request.urlopen(f"http://127.0.0.1:{port + i}/metrics", timeout=2)
    proc.send_signal(signal.SIGINT)
    out, rest = proc.communicate(timeout=30)
    assert proc.returncode == 0, err + rest
    assert not _alive(children)
    assert not _workdir(err).exists()
    report = json.loads(out)
    assert len(report["summary"]) == 3
    drills = report["drills"]
    check_frozen(drills["frozen_worker"])
    check_sticky(drills["sticky_connection"])
    check_quota(drills["quota_leak"])


@pytest.mark.parametrize(("sig", "marker", "settle"), [
    (signal.SIGINT, "SIGKILL w", 0.5),  # drill 3: a holder was just killed and restarted
    (signal.SIGTERM, "drill 2/3", 1.0),  # drill 2: gateway and executors starting
])
def test_interrupt_mid_drill_stops_every_child(sig, marker, settle):
    proc = _start("--short")
    seen = _wait_for(proc, marker, timeout=90)
    time.sleep(settle)
    children = _children_of(proc.pid)
    assert len(children) >= 2
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "interrupted" in err and "Traceback" not in err
    deadline = time.monotonic() + 5
    while _alive(children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(children)
    assert not _workdir(seen).exists()


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
    check_quota(d3)


@pytest.mark.parametrize(("args", "message"), [
    (["--workers", "1"], "--workers must be 2..16"),
    (["--metrics-port", "80"], "--metrics-port must leave room"),
    (["--workers", "0"], "--workers must be 2..16"),
    (["--workers", "1000"], "--workers must be 2..16"),
    (["--metrics-port", "80"], "--metrics-port must leave room"),
    (["--redis", "redis://127.0.0.1:1/0"], "--redis: cannot use"),
    (["--redis", "not-a-url"], "--redis: cannot use"),
    (["--redis", ""], "--redis: empty URL"),
])
def test_demo_rejects_bad_options_in_one_line(args, message):
    res = subprocess.run([*DEMO, *args], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert message in res.stderr
    assert "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("value", ["x", "-", "1.5"])
def test_demo_rejects_non_integer_workers_with_usage(value):
    res = subprocess.run([*DEMO, "--workers", value], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "argument --workers: invalid int value" in res.stderr


def test_demo_rejects_a_busy_metrics_port():
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = subprocess.run([*DEMO, "--workers", "2", "--metrics-port", str(port)],
                             capture_output=True, text=True, timeout=60)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"port {port} on 127.0.0.1 is not free" in res.stderr


def test_cli_unknown_command_is_usage_error():
    res = subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "nope"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "Traceback" not in res.stderr


def test_catalog_command_lists_every_metric():
    from corevo_obs.core.catalog import CATALOG

    res = subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "catalog", "--format",
                          "json"], capture_output=True, text=True, check=True)
    assert {m["name"] for m in json.loads(res.stdout)} == set(CATALOG)
