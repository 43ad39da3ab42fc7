"""The OTel metrics path in the server people run: gunicorn, 3 UvicornWorker workers.

Each worker (tests/helpers/otel_app.py) exports its own data twice: over OTLP/HTTP to a
receiver this test runs (decoded with opentelemetry-proto), and through the SDK's
Prometheus reader (with exemplars: ``ExemplarPrometheusReader``) that a real Prometheus
scrapes, its targets found by file_sd. Requests and one 0.5 s stall later:

- OTLP carries the exact request, claim and stall counts, and the stall's exemplar names
  the trace of the request that held the loop, from the worker that served it;
- Prometheus answers the shipped dashboards' queries (unchanged: the OTel names are the
  catalog's) with the same exact counts, evaluates the shipped alert rules without an
  error, and its exemplar store names the stall's trace;
- a worker SIGKILLed after an export loses nothing it had exported: the receiver keeps
  its counts, and the totals after more requests are exact.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from corevo_obs.core.catalog import sample_name_index
from corevo_obs.tooling.grafana import load_json, panel_queries
from corevo_obs.tooling.grafana.promql import concrete, metric_names
from tests.apps import (
    PROMETHEUS,
    ROOT,
    app_env,
    eventually,
    prometheus_server,
    python,
    scalar,
    serve,
)
from tests.conftest import HELPERS, _need, free_port
from tests.helpers.otlp_receiver import OtlpReceiver, OtlpState

TOTAL = "corevo_task_total_seconds_count"
#: what the workload drives: the panels of these boards that read only these must answer
DRIVEN = {"corevo_task_dispatch_seconds", "corevo_task_first_event_seconds",
          "corevo_task_total_seconds", "corevo_event_loop_lag_seconds",
          "corevo_event_loop_heartbeat_timestamp_seconds",
          "corevo_event_loop_stall_in_progress_seconds", "corevo_event_loop_stalls_total",
          "corevo_event_loop_stall_seconds", "corevo_event_loop_stalls_by_cause_total",
          "corevo_event_loop_busy_seconds_total"}
BOARDS = ("task-stages", "loop-health")
RULES = ROOT / "alerts" / "corevo.rules.yml"
FIRST, SECOND = 45, 30  # /hit requests before and after the kill


@pytest.fixture(autouse=True)
def _need_prometheus() -> None:
    if not Path(PROMETHEUS).exists():
        _need("prometheus not installed (apt-get install prometheus)")


@contextlib.contextmanager
def prometheus_sd(tmp: Path, targets: Path) -> Iterator[str]:
    """A real Prometheus (1 s scrapes, exemplar storage) over the file_sd targets the
    workers write; yields its base URL."""
    web = free_port()
    config = {"global": {"scrape_interval": "1s", "scrape_timeout": "900ms",
                         "evaluation_interval": "1s"},
              "rule_files": [str(RULES)],
              "scrape_configs": [{"job_name": "otel", "file_sd_configs": [
                  {"files": [str(targets / "*.json")], "refresh_interval": "1s"}]}]}
    with prometheus_server(tmp, config, web, "--enable-feature=exemplar-storage") as base:
        yield base


def _get(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            body = reply.read()
    except OSError:
        return None
    try:
        return json.loads(body)
    except ValueError:
        return body


def _hits(port: int, n: int) -> None:
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: _get(f"http://127.0.0.1:{port}/hit"), range(n)))
    assert all(isinstance(g, dict) for g in got), got


def _exemplar_traces(prom: str, metric: str) -> set[str]:
    now = time.time()
    q = urllib.parse.urlencode({"query": metric, "start": now - 600, "end": now + 60})
    body = _get(f"{prom}/api/v1/query_exemplars?{q}")
    return {e["labels"].get("trace_id", "") for series in body["data"]
            for e in series["exemplars"]}


def _panels() -> list[tuple[str, str]]:
    index = sample_name_index()
    boards = load_json(ROOT / "dashboards")
    return [(f"{path.stem}: {title}", expr) for path, board in boards.items()
            if path.stem in BOARDS
            for title, expr in panel_queries(board)
            if {index[n].name for n in metric_names(expr)} <= DRIVEN]


@pytest.mark.timeout(240)
def test_three_workers_export_exact_counts_and_the_stalls_trace(tmp_path: Path) -> None:
    mp, targets = tmp_path / "mp", tmp_path / "targets"
    mp.mkdir()
    targets.mkdir()
    app_port = free_port()
    log = tmp_path / "gunicorn.log"
    with OtlpReceiver() as otlp:
        env = app_env(PROMETHEUS_MULTIPROC_DIR=str(mp), BIND=f"127.0.0.1:{app_port}",
                      WORKERS="3", COREVO_METRICS_PORT=str(free_port()),
                      OTLP_ENDPOINT=otlp.endpoint, OTLP_INTERVAL_MS="300",
                      TARGETS_DIR=str(targets))
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HELPERS)])
        cmd = python("-m", "gunicorn", "-c", "examples/gunicorn_conf.py", "otel_app:app")
        with serve(cmd, app_port, env, log), prometheus_sd(tmp_path, targets) as prom:
            eventually("3 workers announced", lambda: len(list(targets.iterdir())) == 3, 30)
            _hits(app_port, FIRST)
            stall = _get(f"http://127.0.0.1:{app_port}/stall")
            served = FIRST + 1
            eventually("OTLP: every request exported", lambda: otlp.snapshot().total(
                "corevo_task_total_seconds") == served, timeout=30)
            got: OtlpState = otlp.snapshot()
            # (a) OTLP: exact counts, the stall and its trace, per-process resources
            assert got.total("corevo_claim_total", outcome="won") == FIRST
            assert got.total("corevo_task_total_seconds", outcome="completed") == served
            eventually("OTLP: the stall counted", lambda: otlp.snapshot().total(
                "corevo_event_loop_stalls_total") == 1, timeout=15)
            got = otlp.snapshot()
            workers = {r["corevo.worker"] for r in got.resources.values()}
            assert workers == {"w0", "w1", "w2"}, got.resources
            assert got.units["corevo_event_loop_stall_seconds"] == "s"
            held = [e for e in got.exemplars if e.metric == "corevo_event_loop_stall_seconds"]
            assert {e.trace_id for e in held} == {stall["trace_id"]}, held
            assert {got.resources[e.instance]["process.pid"] for e in held} == {stall["pid"]}
            assert all(e.value >= 0.45 for e in held)
            stage = [e for e in got.exemplars if e.metric == "corevo_task_total_seconds"]
            assert len({e.trace_id for e in stage}) > 1  # each request its own trace
            busy = got.by_instance("corevo_event_loop_busy_seconds_total")
            assert len(busy) == 3 and all(v > 0 for v in busy.values()), busy
            # (b) Prometheus: the dashboards' queries, the exact counts, the stall's trace
            eventually("Prometheus: every request", lambda: scalar(
                prom, f"sum({TOTAL})") == served, timeout=30)
            assert scalar(prom, 'sum(corevo_claim_total{outcome="won"})') == FIRST
            assert scalar(prom, "sum(corevo_event_loop_stalls_total)") == 1
            assert scalar(prom, "count(count by (worker) (corevo_event_loop_lag_seconds_count))"
                          ) == 3
            time.sleep(2)  # two scrapes more: every rate() has two points after the stall
            empty = [where for where, expr in _panels()
                     if not _query(prom, concrete(expr, rate_interval="30s"))]
            assert not empty, empty
            assert len(_panels()) >= 8
            assert _exemplar_traces(prom, "corevo_event_loop_stall_seconds_bucket") == {
                stall["trace_id"]}
            # the shipped alert rules evaluate on the OTel series (extra labels and all)
            rules = [r for g in _get(f"{prom}/api/v1/rules")["data"]["groups"]
                     for r in g["rules"]]
            assert rules and all(r.get("lastEvaluation", "").startswith("2") for r in rules)
            assert {r["name"]: r.get("lastError") for r in rules if r["health"] != "ok"} == {}
            # a worker SIGKILLed after its export: nothing it exported is lost
            by_instance = got.by_instance("corevo_task_total_seconds")
            victim = max(by_instance, key=by_instance.__getitem__)
            kept = by_instance[victim]
            assert kept > 0
            os.kill(int(got.resources[victim]["process.pid"]), signal.SIGKILL)
            eventually("a worker in its place", lambda: len(list(targets.iterdir())) == 4, 30)
            _hits(app_port, SECOND)
            eventually("OTLP: every request, the killed worker's too", lambda: otlp.snapshot(
                ).total("corevo_task_total_seconds") == served + SECOND, timeout=30)
            after = otlp.snapshot()
            assert after.by_instance("corevo_task_total_seconds")[victim] == kept
            assert after.total("corevo_claim_total", outcome="won") == FIRST + SECOND
            eventually("Prometheus: every request, the killed worker's too", lambda: scalar(
                prom, f"sum(max_over_time({TOTAL}[10m]))") == served + SECOND, timeout=30)


def _query(prom: str, expr: str) -> list[Any]:
    body = _get(f"{prom}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")
    assert body and body["status"] == "success", (expr, body)
    return list(body["data"]["result"])
