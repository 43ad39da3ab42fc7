"""End to end: a real Prometheus scrapes real workers, evaluates every panel and the alerts.

Three workers (tests/helpers/e2e_worker.py) run the suite's instrumentation; one freezes
its loop for 38 s, the two others also route cancels and commands over a SQLite cancel
bus (every delivery path, every command outcome, late side effects). Prometheus scrapes
every second and evaluates a copy of alerts/corevo.rules.yml whose only change is
``for: 1s`` on every rule (so the test waits for the thresholds, not for production
patience). Grafana's variables are replaced with concrete values before a panel query goes
to the HTTP API.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from corevo_obs.core.catalog import sample_name_index
from corevo_obs.tooling.grafana import load_json, panel_queries
from corevo_obs.tooling.grafana.promql import concrete, metric_names

from .conftest import _need, free_port, helper_cmd

ROOT = Path(__file__).resolve().parent.parent
PROMETHEUS = "/usr/bin/prometheus"
STALL_AFTER, STALL_FOR = 3.0, 38.0
RATE = "15s"

#: Catalog metrics that the e2e workload cannot produce, each with the reason. A panel
#: whose every metric is listed here is not required to return data. A new metric must be
#: driven by the workers, or listed here with a reason.
NOT_DRIVEN: dict[str, str] = {
    # the lease backend beyond one server: the e2e workers run on SQLite, no Redis
    # topology; tests/test_leases_cluster.py, test_leases_sentinel.py and
    # test_leases_breaker.py drive these on real servers and read them back.
    "corevo_lease_stranded_total": "sharded quotas need a Redis Cluster",
    "corevo_lease_rebalanced_total": "sharded quotas need a Redis Cluster",
    "corevo_lease_replica_wait_timeouts_total": "WAIT needs a Redis primary with replicas",
    "corevo_breaker_state": "the breaker's states need a lease backend taken down",
    "corevo_breaker_transitions_total": "the breaker's states need a lease backend taken down",
    "corevo_breaker_short_circuited_total": "the breaker's states need a lease backend "
                                            "taken down",
    "corevo_lease_fail_open_total": "fail-open grants need a lease backend taken down",
    # counted by a gunicorn master; tests/test_alert_precision.py drives it under gunicorn
    "corevo_worker_killed_total": "timeout kills need a gunicorn master",
    "corevo_worker_killed_stall_seconds": "timeout kills need a gunicorn master",
    # counted by the ASGI middleware; tests/test_integrations_frameworks.py (Litestar,
    # Quart under their servers) and tests/test_routes.py read it back
    "corevo_task_unrouted_total": "the e2e workers serve no ASGI app",
}


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


class Prom:
    def __init__(self, base: str) -> None:
        self.base = base

    def query(self, expr: str) -> list[dict[str, Any]]:
        q = urllib.parse.urlencode({"query": expr})
        body = _get(f"{self.base}/api/v1/query?{q}")
        assert body["status"] == "success", (expr, body)
        return list(body["data"]["result"])

    def alerts(self, name: str, state: str = "firing") -> list[dict[str, str]]:
        found = _get(f"{self.base}/api/v1/alerts")["data"]["alerts"]
        return [a["labels"] for a in found
                if a["labels"]["alertname"] == name and a["state"] == state]

    def wait(self, what: str, check: Any, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = check()
            if got:
                return got
            time.sleep(0.5)
        pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


def _test_rules(dst: Path) -> Path:
    doc = yaml.safe_load((ROOT / "alerts" / "corevo.rules.yml").read_text())
    for group in doc["groups"]:
        for rule in group["rules"]:
            rule["for"] = "1s"
    dst.write_text(yaml.safe_dump(doc))
    return dst


def _spawn(
    name: str, env: dict[str, str], mp: Path, *args: str
) -> tuple[subprocess.Popen[str], int]:
    mp.mkdir()
    proc = subprocess.Popen(
        helper_cmd("e2e_worker.py", name, *args), text=True,
        env={**env, "PROMETHEUS_MULTIPROC_DIR": str(mp)},
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    line = proc.stdout.readline() if proc.stdout else ""
    if not line:
        proc.kill()
        pytest.fail(f"worker {name} did not start")
    return proc, int(json.loads(line)["port"])


@pytest.fixture
def stack(tmp_path: Path, worker_env: dict[str, str]) -> Iterator[tuple[Prom, dict[str, int]]]:
    if not os.access(PROMETHEUS, os.X_OK) or shutil.which("promtool") is None:
        _need("prometheus not installed (apt-get install prometheus)")
    db, jobs = str(tmp_path / "leases.db"), str(tmp_path / "jobs.db")
    procs: list[subprocess.Popen[str]] = []
    ports: dict[str, int] = {}
    try:
        # w2 starts first so it holds an llm lease when it freezes (and gets it reaped)
        for name, extra in [("w2", ["--stall-after", str(STALL_AFTER),
                                    "--stall-for", str(STALL_FOR)]),
                            ("w0", ["--cancels"]), ("w1", ["--cancels"])]:
            proc, ports[name] = _spawn(name, worker_env, tmp_path / f"metrics-{name}",
                                       "--db", db, "--jobs", jobs, "--run-for", "85", *extra)
            procs.append(proc)
            time.sleep(0.3)
        web = free_port()
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s",
                       "scrape_timeout": "900ms"},
            "rule_files": [str(_test_rules(tmp_path / "rules.yml"))],
            "scrape_configs": [{
                "job_name": "corevo-e2e",
                "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in ports.values()]}],
            }],
        }
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        prom_proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}",
             f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{web}",
             "--log.level=warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )
        procs.append(prom_proc)
        prom = Prom(f"http://127.0.0.1:{web}")
        prom.wait("Prometheus ready", lambda: _ready(prom.base), 20)
        yield prom, ports
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()


def _ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/-/ready", timeout=1) as resp:
            return resp.status == 200
    except OSError:
        return False


def _required_panels() -> list[tuple[str, str]]:
    index = sample_name_index()
    out = []
    for path, board in load_json(ROOT / "dashboards").items():
        for title, expr in panel_queries(board):
            metrics = {index[n].name for n in metric_names(expr)}
            if not metrics <= set(NOT_DRIVEN):
                out.append((f"{path.stem}: {title}", expr))
    return out


@pytest.mark.timeout(150)
def test_prometheus_sees_frozen_worker_and_every_panel_has_data(stack) -> None:
    prom, ports = stack
    started = time.monotonic()

    frozen = prom.wait(
        "CorevoLoopFrozen firing for w2",
        lambda: prom.alerts("CorevoLoopFrozen"), STALL_AFTER + STALL_FOR + 10,
    )
    assert [a["worker"] for a in frozen] == ["w2"]
    # the watchdog reports the freeze, so the heartbeat fallback stays quiet (one page)
    assert prom.alerts("CorevoLoopHeartbeatStale", "pending") == []
    assert prom.alerts("CorevoLoopHeartbeatStale") == []
    # the endpoint kept answering during the freeze: no failed scrape since it began
    assert prom.query(f'min_over_time(up{{instance="127.0.0.1:{ports["w2"]}"}}[40s]) == 1')

    # after the freeze: w2's unrenewed llm lease was reaped and its next heartbeat lost
    # the frozen alert fires ~10 s into the freeze; the heartbeat is lost once it ends
    lost = prom.wait("CorevoLeaseHeartbeatLost for w2",
                     lambda: prom.alerts("CorevoLeaseHeartbeatLost"),
                     STALL_AFTER + STALL_FOR + 20 - (time.monotonic() - started))
    assert {(a["worker"], a["quota"]) for a in lost} == {("w2", "llm")}
    reaped = prom.query('sum(corevo_lease_reaped_total{quota="llm"})')
    assert reaped and float(reaped[0]["value"][1]) >= 1
    assert prom.alerts("CorevoGhostLeasesReaped")
    time.sleep(2)  # a couple of scrapes after the stall, so its stall sample is in range

    empty = []
    for where, expr in _required_panels():
        result = prom.query(concrete(expr, rate_interval=RATE))
        if not result:
            empty.append((where, expr))
    assert not empty, f"panels without data: {json.dumps(empty, indent=1)}"

    _assert_cancel_paths(prom)

    # every rule evaluated without error (vector matching fails only at evaluation time)
    groups = _get(f"{prom.base}/api/v1/rules")["data"]["groups"]
    health = {r["name"]: (r["health"], r.get("lastError")) for g in groups for r in g["rules"]}
    assert len(health) == sum(len(g["rules"]) for g in yaml.safe_load(
        (ROOT / "alerts" / "corevo.rules.yml").read_text())["groups"])
    assert {n: h for n, h in health.items() if h[0] != "ok"} == {}

    lag = prom.query(concrete(
        'max by (worker) (corevo_event_loop_stall_seconds_sum{job=~"$job"})'))
    stalls = {r["metric"]["worker"]: float(r["value"][1]) for r in lag}
    assert stalls["w2"] >= STALL_FOR * 0.9 and stalls.get("w0", 0) < 1
    assert not math.isnan(stalls["w2"])
    assert time.monotonic() - started < 90


def _assert_cancel_paths(prom: Prom) -> None:
    """Every delivery path and command outcome reached Prometheus from both routing workers."""
    def by(expr: str, label: str) -> set[tuple[str, str]]:
        return {(r["metric"]["worker"], r["metric"][label]) for r in prom.query(expr)
                if float(r["value"][1]) >= 1}

    routing = {"w0", "w1"}
    paths = by("corevo_cancel_delivered_total", "path")
    assert paths >= {(w, p) for w in routing for p in ("pubsub", "marker", "lease_expiry")}
    outcomes = by("corevo_command_routed_total", "outcome")
    assert outcomes >= {(w, o) for w in routing for o in ("applied", "fenced", "no_owner")}
    errors = by("corevo_instrumentation_errors_total", "component")
    assert errors >= {(w, "cancel-send") for w in routing}  # the oversized wake-up
    # mean stop latency orders as the paths do: wake-up, then the next heartbeat (0.25 s),
    # then the lease timeout (1 s)
    worst = {r["metric"]["path"]: float(r["value"][1]) for r in prom.query(
        "max by (path) (corevo_cancel_latency_seconds_sum / corevo_cancel_latency_seconds_count)")}
    assert worst["pubsub"] < worst["marker"] < worst["lease_expiry"], worst
    late = prom.wait("CorevoLateSideEffects firing",
                     lambda: prom.alerts("CorevoLateSideEffects"), 20)
    assert {a["worker"] for a in late} == routing
