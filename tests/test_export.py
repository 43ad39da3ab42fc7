"""`corevo-obs export`: the shipped dashboards and alert files, out of an installed package."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "corevo_obs.cli.main", *args],
        capture_output=True, text=True, timeout=60,
    )


def _repo_files(kind: str) -> dict[str, bytes]:
    base = ROOT / kind
    return {
        p.relative_to(base).as_posix(): p.read_bytes()
        for p in base.rglob("*") if p.suffix in {".json", ".yml"}
    }


def test_exports_every_dashboard_and_alert_file_byte_for_byte(tmp_path: Path) -> None:
    done = cli("export", "all", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    for kind in ("dashboards", "alerts"):
        want = _repo_files(kind)
        got = {
            p.relative_to(tmp_path / "out" / kind).as_posix(): p.read_bytes()
            for p in (tmp_path / "out" / kind).rglob("*") if p.is_file()
        }
        assert got == want
    total = sum(len(_repo_files(k)) for k in ("dashboards", "alerts"))
    assert len(done.stdout.splitlines()) == total


def test_exported_rules_pass_promtool_where_they_land(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (apt-get install prometheus)")
    assert cli("export", "alerts", str(tmp_path)).returncode == 0
    alerts = tmp_path / "alerts"
    tests = sorted(str(p.relative_to(alerts)) for p in (alerts / "tests").glob("*.test.yml"))
    assert tests
    checked = subprocess.run([promtool, "check", "rules", "corevo.rules.yml"], cwd=alerts,
                             capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run([promtool, "test", "rules", *tests], cwd=alerts,
                            capture_output=True, text=True, timeout=120)
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_a_changed_file_stops_the_export_before_anything_is_written(tmp_path: Path) -> None:
    edited = tmp_path / "dashboards" / "loop-health.json"
    edited.parent.mkdir(parents=True)
    edited.write_text("{\"my\": \"edits\"}")
    done = cli("export", "all", str(tmp_path))
    assert done.returncode == 2
    assert "loop-health.json" in done.stderr and "--force" in done.stderr
    assert "Traceback" not in done.stderr
    assert edited.read_text() == "{\"my\": \"edits\"}"
    assert not (tmp_path / "alerts").exists()  # nothing half-written
    again = cli("export", "all", str(tmp_path), "--force")
    assert again.returncode == 0, again.stderr
    assert edited.read_bytes() == (ROOT / "dashboards" / "loop-health.json").read_bytes()
    assert cli("export", "all", str(tmp_path)).returncode == 0  # identical files are fine


def test_bad_destinations_are_one_line_errors(tmp_path: Path) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("x")
    for dest in (a_file, a_file / "below"):
        done = cli("export", "dashboards", str(dest))
        assert done.returncode == 2, done
        assert done.stderr.startswith("corevo-obs: error:") and "Traceback" not in done.stderr
    assert cli("export", "grafana", str(tmp_path)).returncode == 2

