"""The quick start's main job runs end to end and names the frozen worker and line."""

from __future__ import annotations

import json
import subprocess
import sys


def test_demo_json_names_the_frozen_worker_and_line():
    res = subprocess.run(
        [sys.executable, "-m", "corevo_obs.cli.main", "demo", "--short", "--json"],
        capture_output=True, text=True, timeout=120,
    )
    assert res.returncode == 0, res.stderr
    d1 = json.loads(res.stdout)["drills"]["frozen_worker"]
    assert d1["frozen_workers"] == [d1["injected_worker"]]
    culprit = d1["stall"]["culprit"]
    assert culprit["file"].endswith("corevo_obs/demo/handlers.py")
    assert culprit["function"] == "_fetch"
    others = [r for n, r in d1["workers"].items() if n != d1["injected_worker"]]
    assert all(r["heartbeat_max_gap_seconds"] < 0.3 for r in others)


def test_demo_rejects_bad_worker_count_without_traceback():
    res = subprocess.run(
        [sys.executable, "-m", "corevo_obs.cli.main", "demo", "--workers", "1"],
        capture_output=True, text=True, timeout=60,
    )
    assert res.returncode == 2
    assert "--workers must be 2..16" in res.stderr
    assert "Traceback" not in res.stderr


def test_cli_unknown_command_is_usage_error():
    res = subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "nope"],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "Traceback" not in res.stderr


def test_catalog_command_lists_every_metric():
    from corevo_obs.catalog import CATALOG

    res = subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "catalog", "--format",
                          "json"], capture_output=True, text=True, check=True)
    assert {m["name"] for m in json.loads(res.stdout)} == set(CATALOG)
