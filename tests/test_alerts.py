"""Alert rules: promtool checks and unit tests, Alertmanager config, and rule hygiene."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from corevo_obs.core.catalog import sample_name_index
from corevo_obs.tooling.grafana.promql import PROMQL_BUILTIN_METRICS, metric_names

ROOT = Path(__file__).resolve().parent.parent
ALERTS = ROOT / "alerts"
RULES = ALERTS / "corevo.rules.yml"
AM_CONFIG = ALERTS / "alertmanager.example.yml"
RUNBOOK = ROOT / "docs" / "runbook.md"
TESTS = sorted((ALERTS / "tests").glob("*.test.yml"))


def _rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def _tool(name: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        pytest.skip(f"{name} not installed (apt-get install prometheus prometheus-alertmanager)")
    return exe


def _run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ALERTS, timeout=60)


def test_promtool_check_rules() -> None:
    done = _run(_tool("promtool"), "check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in done.stdout


def test_promtool_unit_tests_pass() -> None:
    assert TESTS
    done = _run(_tool("promtool"), "test", "rules", *map(str, TESTS))
    assert done.returncode == 0, done.stdout + done.stderr


def test_amtool_accepts_example_and_routes_by_severity() -> None:
    amtool = _tool("amtool")
    done = _run(amtool, "check-config", str(AM_CONFIG))
    assert done.returncode == 0, done.stdout + done.stderr
    cfg = yaml.safe_load(AM_CONFIG.read_text())
    inhibit = cfg["inhibit_rules"][0]
    assert inhibit["source_matchers"] == ['severity="critical"']
    assert inhibit["target_matchers"] == ['severity="warning"']
    for severity, receiver in [("critical", "oncall-pager"), ("warning", "team-chat"),
                               ("info", "team-tickets")]:
        routed = _run(amtool, "config", "routes", "test", f"--config.file={AM_CONFIG}",
                      f"severity={severity}", "worker=w1")
        assert routed.stdout.strip() == receiver, routed.stdout + routed.stderr


def _anchors() -> set[str]:
    heads = re.findall(r"^#+\s+(.+?)\s*$", RUNBOOK.read_text(), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-") for h in heads}


@pytest.mark.parametrize("rule", _rules(), ids=lambda r: r["alert"])
def test_rule_has_required_fields(rule: dict[str, Any]) -> None:
    assert rule.get("for"), "every rule waits a `for` before firing"
    assert rule["labels"]["severity"] in {"critical", "warning", "info"}
    ann = rule["annotations"]
    assert ann["summary"] and ann["description"]
    who = next((w for w in ("worker", "quota", "table") if w in rule["expr"]), "instance")
    assert f"{{{{ $labels.{who} }}}}" in ann["description"]
    page, _, anchor = ann["runbook_url"].partition("#")
    assert page == "docs/runbook.md" and anchor in _anchors()


@pytest.mark.parametrize("rule", _rules(), ids=lambda r: r["alert"])
def test_rule_queries_only_catalog_metrics_and_never_avg(rule: dict[str, Any]) -> None:
    known = set(sample_name_index()) | PROMQL_BUILTIN_METRICS
    names = metric_names(rule["expr"])
    assert names and names <= known
    # never an average across series (one bad worker of ten would vanish in it); an
    # average over time of one series (avg_over_time) is a different thing
    assert not re.search(r"\bavg\s*(\(|by\b|without\b)", rule["expr"])


def _unit_tests() -> list[dict[str, Any]]:
    return [t for f in TESTS for t in yaml.safe_load(f.read_text())["tests"]]


def test_every_rule_has_a_firing_and_a_quiet_unit_test() -> None:
    fires: set[str] = set()
    quiet: set[str] = set()
    for t in _unit_tests():
        for case in t.get("alert_rule_test", []):
            (fires if case.get("exp_alerts") else quiet).add(case["alertname"])
    names = {r["alert"] for r in _rules()}
    assert names - fires == set(), "rules without a firing test"
    assert names - quiet == set(), "rules without a not-firing test"


def _per_target(rule: dict[str, Any]) -> bool:
    """Does the rule alert per worker (or per scrape target), not per quota or job?"""
    return bool(re.search(r"\bby \([^)]*\b(worker|instance)\b", rule["expr"]))


@pytest.mark.parametrize("rule", [r for r in _rules() if _per_target(r)],
                         ids=lambda r: r["alert"])
def test_one_bad_worker_of_ten_fires_alone(rule: dict[str, Any]) -> None:
    """The max-across-workers property, per rule: a promtool case with ten or more targets
    in which exactly one alert of this rule fires."""
    for t in _unit_tests():
        targets = {m for s in t["input_series"]
                   for m in re.findall(r'instance="([^"]+)"', s["series"])}
        for case in t.get("alert_rule_test", []):
            if (case["alertname"] == rule["alert"] and len(targets) >= 10
                    and len(case.get("exp_alerts") or []) == 1):
                return
    pytest.fail(f"no promtool test where one of ten targets fires {rule['alert']} alone")
