"""Histogram buckets that can show a regression, and that users can change.

Prometheus reads a quantile by linear interpolation inside the bucket where the rank
falls, so a latency that moves within one bucket does not move its quantiles at all. The
stage defaults are dense enough that a 10 % move of a typical first event (50 ms – 2 s)
crosses a bound, which these tests prove with the same interpolation; and the shipped
rules and panels read quantiles over whatever ``le`` bounds exist, so custom buckets
keep them right.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from corevo_obs.core.catalog import LATENCY_BUCKETS, STAGE_BUCKETS, spec
from corevo_obs.core.errors import ConfigError
from corevo_obs.core.metrics import buckets, child, set_buckets
from corevo_obs.tooling.grafana import load_json, panel_queries

ROOT = Path(__file__).resolve().parent.parent


def histogram_quantile(q: float, bounds: tuple[float, ...], counts: list[float]) -> float:
    """Prometheus' histogram_quantile over cumulative ``counts`` per bound (+Inf last):
    the bucket where rank q*total falls, linear inside it, the first bucket from 0."""
    total = counts[-1]
    rank = q * total
    upper = [*bounds, math.inf]
    i = next(k for k, c in enumerate(counts) if c >= rank)
    if upper[i] == math.inf:
        return bounds[-1]
    start = 0.0 if i == 0 else upper[i - 1]
    below = 0.0 if i == 0 else counts[i - 1]
    return start + (upper[i] - start) * (rank - below) / (counts[i] - below)


def _constant(value: float, bounds: tuple[float, ...], n: int = 1000) -> list[float]:
    """Cumulative bucket counts of ``n`` observations of one value (``le`` inclusive)."""
    return [float(n) if value <= b else 0.0 for b in bounds] + [float(n)]


def _quantiles(value: float, bounds: tuple[float, ...]) -> tuple[float, float]:
    counts = _constant(value, bounds)
    return histogram_quantile(0.5, bounds, counts), histogram_quantile(0.99, bounds, counts)


def test_stage_defaults_come_from_the_catalog() -> None:
    for name in ("corevo_task_dispatch_seconds", "corevo_task_first_event_seconds",
                 "corevo_task_external_seconds"):
        assert spec(name).buckets == STAGE_BUCKETS
    layout = buckets(CollectorRegistry())
    assert layout.stages == STAGE_BUCKETS
    assert layout.lag == spec("corevo_event_loop_lag_seconds").buckets


def test_a_ten_percent_move_of_206_ms_shows_in_p50_and_p99() -> None:
    """The issue's case: 206 ms read p50 175 ms / p99 249 ms on the old buckets, and a
    10 % slower 227 ms read exactly the same; on the defaults both quantiles move."""
    old_206, old_227 = _quantiles(0.206, LATENCY_BUCKETS), _quantiles(0.227, LATENCY_BUCKETS)
    assert old_206 == old_227 and round(old_206[0], 3) == 0.175
    p50_a, p99_a = _quantiles(0.206, STAGE_BUCKETS)
    p50_b, p99_b = _quantiles(0.227, STAGE_BUCKETS)
    assert p50_b > p50_a and p99_b > p99_a
    for got, true in ((p50_a, 0.206), (p99_a, 0.206), (p50_b, 0.227), (p99_b, 0.227)):
        assert abs(got - true) / true < 0.1  # and each reads within 10 % of the truth


@pytest.mark.parametrize("start", [0.05 * 1.1 ** (k / 7) for k in range(7 * 40)
                                   if 0.05 * 1.1 ** (k / 7) <= 2.0])
def test_every_ten_percent_move_from_50_ms_to_2_s_shows(start: float) -> None:
    before, after = _quantiles(start, STAGE_BUCKETS), _quantiles(start * 1.1, STAGE_BUCKETS)
    assert after[0] > before[0] and after[1] > before[1], (start, before, after)


def test_keyword_beats_environment_beats_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COREVO_BUCKETS_STAGES", "0.1, 0.2,0.4")
    monkeypatch.setenv("COREVO_BUCKETS_LAG", "0.01,0.1")
    chosen = set_buckets(CollectorRegistry(), lag=(0.005, 0.05, 0.5))
    assert chosen.stages == (0.1, 0.2, 0.4) and chosen.lag == (0.005, 0.05, 0.5)
    assert chosen.total == spec("corevo_task_total_seconds").buckets


@pytest.mark.parametrize(("env", "kwargs", "source"), [
    ({"COREVO_BUCKETS_STAGES": "0.2,0.1"}, {}, "$COREVO_BUCKETS_STAGES"),
    ({"COREVO_BUCKETS_LAG": "fast"}, {}, "$COREVO_BUCKETS_LAG"),
    ({"COREVO_BUCKETS_TOTAL": "0,1"}, {}, "$COREVO_BUCKETS_TOTAL"),
    ({}, {"stages": (0.1, "x")}, "set_buckets(stages=...)"),
    ({}, {"lag": "0.1,0.2"}, "set_buckets(lag=...)"),
    ({}, {"lag": ()}, "set_buckets(lag=...)"),
])
def test_a_bad_layout_names_its_source(monkeypatch: pytest.MonkeyPatch, env: dict[str, str],
                                       kwargs: dict[str, object], source: str) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ConfigError, match=re.escape(source)):
        set_buckets(CollectorRegistry(), **kwargs)  # type: ignore[arg-type]


def test_custom_buckets_reach_the_exposition_and_late_changes_are_refused() -> None:
    registry = CollectorRegistry()
    set_buckets(registry, stages=(0.2, 0.21, 0.22, 0.23))
    child("corevo_task_first_event_seconds", registry, worker="w0", kind="chat").observe(0.215)
    les = [s.labels["le"] for m in registry.collect() for s in m.samples
           if s.name == "corevo_task_first_event_seconds_bucket"]
    assert les == ["0.2", "0.21", "0.22", "0.23", "+Inf"]
    set_buckets(registry, stages=(0.2, 0.21, 0.22, 0.23))   # the same again: fine
    with pytest.raises(ConfigError, match="before the instrumentation starts"):
        set_buckets(registry, stages=(0.1, 1.0))


def test_a_bad_environment_inside_a_host_is_counted_and_the_default_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COREVO_BUCKETS_STAGES", "slow")
    registry = CollectorRegistry()
    child("corevo_task_dispatch_seconds", registry, worker="w0", kind="chat").observe(0.01)
    assert buckets(registry).stages == STAGE_BUCKETS
    assert registry.get_sample_value("corevo_instrumentation_errors_total",
                                     {"worker": "unknown", "component": "buckets"}) == 1


def test_no_rule_or_panel_names_a_bucket_bound() -> None:
    """A rule or panel that selects ``le="0.25"`` breaks when the layout changes; every
    quantile goes through histogram_quantile over the bounds that exist."""
    rules = yaml.safe_load((ROOT / "alerts" / "corevo.rules.yml").read_text())
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    exprs += [e for board in load_json(ROOT / "dashboards").values()
              for _, e in panel_queries(board)]
    assert exprs
    assert [e for e in exprs if re.search(r"\ble\s*=~?\s*\"", e)] == []


def test_lag_alert_fires_with_custom_buckets() -> None:
    """CorevoLoopLagHigh evaluated by promtool on a lag histogram with a custom layout."""
    if shutil.which("promtool") is None:
        pytest.skip("promtool not installed")
    done = subprocess.run(["promtool", "test", "rules", "tests/custom_buckets.test.yml"],
                          cwd=ROOT / "alerts", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
