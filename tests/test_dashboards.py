"""Dashboards: generated JSON is fresh, and panels and the catalog cover each other."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from corevo_obs.core.catalog import CATALOG, sample_name_index
from corevo_obs.tooling.grafana import load_json, panel_queries, render_all
from corevo_obs.tooling.grafana.promql import concrete, metric_names

ROOT = Path(__file__).resolve().parent.parent
DASHBOARDS = ROOT / "dashboards"


def _all_queries() -> list[tuple[str, str, str]]:
    return [(path.name, title, expr)
            for path, board in load_json(DASHBOARDS).items()
            for title, expr in panel_queries(board)]


def test_committed_json_is_fresh() -> None:
    stale = [str(r.output.name) for r in render_all(DASHBOARDS) if r.stale]
    assert not stale, f"run `corevo-obs dashboards build`: stale {stale}"


def test_every_panel_metric_is_in_the_catalog() -> None:
    index = sample_name_index()
    unknown = {(board, title, name) for board, title, expr in _all_queries()
               for name in metric_names(expr) if name not in index}
    assert not unknown


def test_every_catalog_metric_is_on_some_panel() -> None:
    index = sample_name_index()
    charted = {index[n].name for _, _, e in _all_queries() for n in metric_names(e) if n in index}
    assert set(CATALOG) - charted == set()


def test_queries_use_worker_and_job_variables_and_never_avg() -> None:
    for board, title, expr in _all_queries():
        assert 'job=~"$job"' in expr, (board, title)
        assert "avg" not in expr, (board, title)
        assert "$" not in concrete(expr), (board, title)


def test_histogram_quantile_shape() -> None:
    exprs = [e for _, _, e in _all_queries() if "corevo_event_loop_lag_seconds_bucket" in e]
    assert ("histogram_quantile(0.99, sum by (le, job, worker) (rate(corevo_event_loop_lag_"
            'seconds_bucket{job=~"$job",worker=~"$worker"}[$__rate_interval])))') in exprs


def test_every_query_keeps_jobs_and_workers_apart() -> None:
    """Two services both have a ``w1``: every aggregation keeps ``job`` and ``worker``
    (or ``instance``, for what is per host), and every legend shows both."""
    for path, board in load_json(DASHBOARDS).items():
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                expr, legend = target["expr"], target["legendFormat"]
                groupings = re.findall(r"\bby \(([^)]*)\)", expr)
                assert groupings, (path.name, panel["title"], expr)
                for labels in groupings:
                    kept = {lb.strip() for lb in labels.split(",")}
                    assert kept >= {"job"} and kept & {"worker", "instance"} or \
                        kept == {"job"}, (path.name, panel["title"], expr)
                assert "{{job}}" in legend, (path.name, panel["title"], legend)
                assert "{{worker}}" in legend or "{{instance}}" in legend or \
                    expr.startswith("max by (job) ("), (path.name, panel["title"], legend)


def test_stage_histograms_are_grouped_per_host_and_the_kill_panel_counts_from_zero() -> None:
    exprs = [e for _, _, e in _all_queries()]
    stages = [e for e in exprs if "corevo_task_first_event_seconds_bucket" in e]
    assert stages and all("by (le, job, instance)" in e and "$worker" not in e for e in stages)
    kills = [e for e in exprs if "corevo_worker_killed_total" in e]
    assert kills == ['sum by (job, worker, reason) (increase(corevo_worker_killed_total'
                     '{job=~"$job",worker=~"$worker"}[15m]))']


def test_metric_names_reader() -> None:
    expr = ('max by (job, worker) (increase(corevo_claim_start_total{outcome="fenced"}[10m]))'
            " > 0 and on(job) up == 0 or vector(1) * bogus_metric offset 5m")
    assert metric_names(expr) == {"corevo_claim_start_total", "up", "bogus_metric"}
    assert metric_names('# a comment names no metric\nx{a="#b"}') == {"x"}


def test_cli_check_fails_when_stale(tmp_path: Path) -> None:
    src = tmp_path / "x.dashboard.py"
    src.write_text((DASHBOARDS / "offload.dashboard.py").read_text())
    cmd = [sys.executable, "-m", "corevo_obs.cli.main", "dashboards", "build", "--dir",
           str(tmp_path)]
    assert subprocess.run([*cmd, "--check"], capture_output=True).returncode == 1
    assert subprocess.run(cmd, capture_output=True).returncode == 0
    assert (tmp_path / "x.json").exists()
    done = subprocess.run([*cmd, "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("bad", ["", "dashboard = None\n"])
def test_cli_reports_bad_source(tmp_path: Path, bad: str) -> None:
    (tmp_path / "bad.dashboard.py").write_text(bad)
    done = subprocess.run(
        [sys.executable, "-m", "corevo_obs.cli.main", "dashboards", "build", "--dir",
         str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2 and "defines no 'dashboard'" in done.stderr


def test_grafanalib_is_imported_only_to_build() -> None:
    code = ("import sys, corevo_obs.cli.main as m; import corevo_obs.tooling.grafana.promql; "
            "m.build_parser(); print('grafanalib' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr
