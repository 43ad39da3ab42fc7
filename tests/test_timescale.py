"""The alert matrix's one test-time factor (tests/helpers/timescale.py): durations
divided, everything else as shipped, and the result still a valid rule file and
Alertmanager config for the real tools."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from .helpers.timescale import (
    longest_window,
    redirect_webhooks,
    render,
    rules_by_name,
    scale_alertmanager,
    scale_expr,
    scale_rules,
    seconds,
)

ALERTS = Path(__file__).resolve().parent.parent / "alerts"
_RANGES = re.compile(r"\[[^\]]*\]|offset\s+\S+")


def test_durations_parse_and_render() -> None:
    assert seconds("1h30m") == 5400 and seconds("500ms") == 0.5 and seconds("0s") == 0
    assert render(45) == "45s" and render(0.75) == "750ms" and render(0) == "0s"
    with pytest.raises(ValueError):
        seconds("15 minutes")


def test_expr_ranges_subqueries_and_offsets_divided() -> None:
    assert scale_expr("increase(x[15m]) > 0", 20) == "increase(x[45s]) > 0"
    assert scale_expr("max_over_time(y[10m:1m])", 20) == "max_over_time(y[30s:3s])"
    assert scale_expr("avg_over_time(y[5m:])", 10) == "avg_over_time(y[30s:])"
    assert scale_expr("x unless x offset 15m", 20) == "x unless x offset 45s"
    # thresholds and label values are not durations of the rule's clock
    assert scale_expr('x{le="10"} > 30', 20) == 'x{le="10"} > 30'


def test_shipped_rules_keep_their_meaning() -> None:
    shipped = yaml.safe_load((ALERTS / "corevo.rules.yml").read_text())
    scaled = scale_rules(shipped, 20)
    before, after = rules_by_name(shipped), rules_by_name(scaled)
    assert before.keys() == after.keys()
    for name, rule in before.items():
        new = after[name]
        # same expression once the durations are taken out; labels and annotations kept
        assert _RANGES.sub("", str(rule["expr"])) == _RANGES.sub("", str(new["expr"])), name
        assert seconds(str(new.get("for", "0s"))) == pytest.approx(
            seconds(str(rule.get("for", "0s"))) / 20), name
        assert new["labels"] == rule["labels"] and new["annotations"] == rule["annotations"]
    assert longest_window(scaled) == pytest.approx(longest_window(shipped) / 20)


def test_scaled_rules_load_in_promtool(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed")
    path = tmp_path / "rules.yml"
    shipped = yaml.safe_load((ALERTS / "corevo.rules.yml").read_text())
    path.write_text(yaml.safe_dump(scale_rules(shipped, 20), sort_keys=False))
    done = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


def test_alertmanager_waits_divided_and_webhooks_redirected(tmp_path: Path) -> None:
    shipped = yaml.safe_load((ALERTS / "alertmanager.example.yml").read_text())
    scaled = redirect_webhooks(scale_alertmanager(shipped, 20), "http://127.0.0.1:1234")

    def routes(node: dict[str, object]) -> list[dict[str, object]]:
        children = node.get("routes", [])
        assert isinstance(children, list)
        return [node, *(r for child in children for r in routes(child))]

    for old, new in zip(routes(shipped["route"]), routes(scaled["route"]), strict=True):
        for key in ("group_wait", "group_interval", "repeat_interval"):
            if key in old:
                assert seconds(str(new[key])) == pytest.approx(seconds(str(old[key])) / 20)
        assert {k: v for k, v in old.items() if k not in ("routes", "group_wait",
                "group_interval", "repeat_interval")} == \
            {k: v for k, v in new.items() if k not in ("routes", "group_wait",
             "group_interval", "repeat_interval")}
    assert scaled["inhibit_rules"] == shipped["inhibit_rules"]
    urls = [h["url"] for r in scaled["receivers"] for h in r.get("webhook_configs", [])]
    assert urls and all(u.startswith("http://127.0.0.1:1234/") for u in urls)
    assert [u.rsplit("/", 1)[1] for u in urls] == [
        h["url"].rsplit("/", 1)[1] for r in shipped["receivers"]
        for h in r.get("webhook_configs", [])]
    amtool = shutil.which("amtool")
    if amtool is not None:
        path = tmp_path / "am.yml"
        path.write_text(yaml.safe_dump(scaled, sort_keys=False))
        done = subprocess.run([amtool, "check-config", str(path)], capture_output=True,
                              text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
