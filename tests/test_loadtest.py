"""``corevo-obs loadtest`` against the examples' FastAPI app, on real processes.

Served under ``uvicorn --workers 2`` beside ``corevo-obs metrics serve``, with the tool's
own fixed-latency upstream, a seeded mix (uploads, streams, WebSockets, cancels,
timeouts, offloaded SDK calls, claimed jobs with events) and one worker SIGKILLed
mid-run: healthy it exits 0 with every verdict exercised (offload queueing, cancels
acknowledged, the dead worker's jobs reconciled); with the planted ``time.sleep(0.4)``
and the planted write-behind task it exits 1 naming the worker, the line, how far the
heartbeat moved and the late side effects. Bad input is one line and exit 2; a
non-loopback URL is refused before anything starts. The HTML report is opened in
headless Chromium: the screenshot shows the plots (their colours are counted in the
decoded pixels) and the page logs no console error (a page that does log one is caught
by the same check).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from corevo_obs.loadtest.driver import plan, plan_digest
from corevo_obs.loadtest.loopback import check_loopback
from corevo_obs.loadtest.server import parse_stall_line
from corevo_obs.loadtest.workload import WorkloadError, load_workload, parse_workload
from tests.apps import ROOT, app_env, python, serve
from tests.conftest import free_port
from tests.helpers.screenshots import chromium, rgb_pixels, shoot

WORKLOAD = ROOT / "examples" / "loadtest.toml"
SLEEP_LINE = next(i for i, line in enumerate(
    (ROOT / "examples" / "fastapi_app.py").read_text().splitlines(), 1)
    if "time.sleep(0.4)" in line)
_runs: dict[str, tuple[subprocess.CompletedProcess[str], Path]] = {}


def _cli(*args: str, env: dict[str, str] | None = None,
         timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", *args], cwd=ROOT,
                          env=env or app_env(), capture_output=True, text=True, timeout=timeout)


def _run(name: str, tmp: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One load test per variant per session (the Chromium test reuses a report)."""
    if name not in _runs:
        out = tmp / name
        done = _cli("loadtest", "examples.fastapi_app:app", "--workload", str(WORKLOAD),
                    "--workers", "2", "--out", str(out), env=app_env(**env))
        _runs[name] = (done, out)
    return _runs[name]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("loadtest")


def _verdicts(out: Path) -> dict[str, dict[str, Any]]:
    report = json.loads((out / "report.json").read_text())
    return {v["name"]: v for v in report["verdicts"]}


@pytest.mark.timeout(120)
def test_healthy_app_holds_every_budget(run_dir: Path) -> None:
    done, out = _run("healthy", run_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((out / "report.json").read_text())
    v = {x["name"]: x for x in report["verdicts"]}
    assert v["loop_lag"]["status"] == "passed" and set(v["loop_lag"]["measured"]) == {"w0", "w1"}
    assert v["heartbeat"]["status"] == "passed"
    assert report["probes"]["heartbeat"], "the heartbeat ran beside the load"
    assert {p["phase"] for p in report["probes"]["heartbeat"]} >= {"baseline", "load"}
    assert v["upstream"]["status"] == "passed" and v["upstream"]["measured"]["requests"] > 10
    # every observation was made, none is a gap: the healthy run passes them on evidence
    assert {x["name"]: x["status"] for x in report["verdicts"]} == dict.fromkeys(
        ("loop_lag", "stalls", "heartbeat", "first_event", "offload", "upstream",
         "late_side_effects", "restart"), "passed"), [x["message"] for x in report["verdicts"]]
    offload = v["offload"]["measured"]
    assert offload["calls"] > 50 and offload["queued"] >= 1, "the 2-thread bound was reached"
    assert offload["rejected_by_reason"] == {"closed": 0, "queue_full": 0, "timeout": 0}
    late = v["late_side_effects"]["measured"]
    assert late["late_side_effects"] == 0
    assert sum(late["cancels_acknowledged"].values()) >= 1, "an execution stopped for a cancel"
    kill = report["kill"]
    assert kill["killed_pid"] and kill["worker"] in ("w0", "w1")
    assert kill["new_worker"] == kill["worker"], "the replacement takes the dead one's slot"
    assert 0 < kill["replaced_after_seconds"] < 20
    assert "SIGKILL" in v["restart"]["message"]
    claims = v["restart"]["measured"]["claims"]
    assert kill["left_running"] >= 1, "the kill caught jobs running on the victim"
    assert claims["terminal"]["lost"] + claims["reclaimed"] >= kill["left_running"], claims
    assert claims["half_finished"] == 0 and claims["started"] > 10, claims
    assert claims["events"]["applied"] > 10, "job events were projected onto their streams"
    outcomes = {name: m["outcomes"] for name, m in report["mix"].items()}
    assert outcomes["timeouts"].get("timeout", 0) >= 1, outcomes
    assert outcomes["stream"].get("cancelled", 0) >= 1, outcomes
    assert outcomes["upload"].get("ok", 0) >= 1 and outcomes["jobs"].get("ok", 0) >= 1
    # the stage histograms came from the app's own metrics during the load
    assert report["stages"]["first_event"]["summary"]["count"] > 100
    assert report["stages"]["external"]["summary"]["count"] > 10
    # the plan is the seed's: same file and seed, same digest
    assert report["workload"]["plan_digest"] == plan_digest(plan(load_workload(WORKLOAD)))


@pytest.mark.timeout(120)
def test_blocking_handler_breaks_the_budget_naming_worker_line_and_heartbeat(
        run_dir: Path) -> None:
    done, out = _run("blocking", run_dir, EXAMPLE_BLOCKING="1", EXAMPLE_LATE_WRITE="1")
    assert done.returncode == 1, done.stdout + done.stderr
    line = f"fastapi_app.py:{SLEEP_LINE}"
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert "worker w" in err and line in err and "heartbeat /items/1 p99 moved" in err, err
    v = _verdicts(out)
    assert v["stalls"]["status"] == "failed" and v["stalls"]["where"].endswith(line)
    assert v["stalls"]["worker"] in ("w0", "w1")
    assert v["loop_lag"]["status"] == "failed"
    assert v["heartbeat"]["status"] == "failed"
    moved = v["heartbeat"]["measured"]["p99_increase_seconds"]
    assert moved > 0.1, v["heartbeat"]
    assert all("cause" in x for x in v.values()), "the attribution slot is in every verdict"
    # time.sleep in the handler: the worker's stall report says blocking, the verdicts carry it
    assert v["stalls"]["cause"] == "blocking", v["stalls"]
    assert v["stalls"]["measured"]["over_budget"][0]["cause"] == "blocking", v["stalls"]
    assert v["loop_lag"]["cause"] == "blocking", v["loop_lag"]
    assert "[blocking]" in v["stalls"]["message"], v["stalls"]
    # the write-behind task outlives its cancelled execution: the gate counts each write
    late = v["late_side_effects"]
    assert late["status"] == "failed" and late["measured"]["late_side_effects"] >= 1, late
    assert "late_side_effects: " in err, err


def test_bad_workload_is_one_line_naming_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "w.toml"
    bad.write_text("seed = 1\nduration_seconds = 900\nmax_requests = 10\n"
                   "[[mix]]\nkind = 'short'\npath = '/x'\nrate = 0\n")
    done = _cli("loadtest", "examples.fastapi_app:app", "--workload", str(bad), timeout=30)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "duration_seconds" in lines[0] and "mix[0].rate" in lines[0], lines[0]


@pytest.mark.parametrize(("doc", "key"), [
    ({"seed": 1, "duration_seconds": 5}, "max_requests: is required"),
    ({"seed": 1, "duration_seconds": 5, "max_requests": 5, "mix": [
        {"kind": "upload", "path": "/u", "rate": 1}]}, "mix[0].upload_bytes"),
    ({"seed": 1, "duration_seconds": 5, "max_requests": 5, "mix": [
        {"kind": "short", "path": "/u", "rate": 1, "colour": "red"}]}, "mix[0].colour: unknown"),
    ({"seed": 1, "duration_seconds": 5, "max_requests": 5, "kill_worker_at_seconds": 9,
      "mix": [{"kind": "short", "path": "/u", "rate": 1}]}, "kill_worker_at_seconds"),
    ({"seed": 1, "duration_seconds": 5, "max_requests": 5, "budgets": {"lag_p99_seconds": -1},
      "mix": [{"kind": "short", "path": "/u", "rate": 1}]}, "budgets.lag_p99_seconds"),
])
def test_workload_errors_name_their_key(doc: dict[str, Any], key: str) -> None:
    with pytest.raises(WorkloadError, match=key.replace("[", r"\[").replace("]", r"\]")):
        parse_workload(doc, "w.toml")


def test_plan_is_bounded_and_repeats_by_seed() -> None:
    w = load_workload(WORKLOAD)
    items = plan(w)
    assert plan_digest(items) == plan_digest(plan(w))
    assert plan_digest(plan(w.with_overrides(seed=w.seed + 1))) != plan_digest(items)
    assert len(items) <= w.max_requests and all(0 < p.at < w.duration_seconds for p in items)
    capped = plan(type(w)(**{**vars(w), "max_requests": 7}))
    assert len(capped) == 7


def test_non_loopback_url_refused() -> None:
    done = _cli("loadtest", "http://example.com:8000", "--workload", str(WORKLOAD), timeout=30)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "non-loopback" in done.stderr
    for url in ("http://10.0.0.1/", "http://[2001:db8::1]:80", "http://127.0.0.1.nip.io/"):
        with pytest.raises(WorkloadError, match="non-loopback"):
            check_loopback(url, "APP")
    for url in ("http://127.0.0.1:8000/", "http://localhost:1", "http://[::1]:2"):
        check_loopback(url, "APP")


@pytest.mark.timeout(90)
def test_url_of_a_running_app_is_driven_and_its_log_tailed(tmp_path: Path) -> None:
    """An app the tool did not start: no kill (said so), stall lines from --server-log."""
    up_port, app_port = free_port(), free_port()
    short = tmp_path / "short.toml"
    short.write_text(
        "seed = 3\nduration_seconds = 4\nmax_requests = 200\nbaseline_seconds = 1.5\n"
        "kill_worker_at_seconds = 2\n"
        f"[upstream]\nport = {up_port}\n"
        "[[mix]]\nkind = 'short'\npath = '/items/{n}'\nrate = 10\n"
        "[[mix]]\nkind = 'short'\npath = '/report'\nrate = 2\n"
        "[[mix]]\nkind = 'short'\npath = '/upstream'\nrate = 3\ncalls_upstream = true\n")
    log = tmp_path / "app.log"
    env = app_env(UPSTREAM_URL=f"http://127.0.0.1:{up_port}/", EXAMPLE_BLOCKING="1",
                  COREVO_LOOP_LOG_INTERVAL="0", EXAMPLE_JOBS_DB=str(tmp_path / "jobs.db"))
    cmd = python("-m", "uvicorn", "examples.fastapi_app:app", "--port", str(app_port),
                 "--log-level", "warning")
    with serve(cmd, app_port, env, log):
        done = _cli("loadtest", f"http://127.0.0.1:{app_port}", "--workload", str(short),
                    "--server-log", str(log), "--out", str(tmp_path / "out"), "--json")
    assert done.returncode == 1, done.stdout + done.stderr
    v = {x["name"]: x for x in json.loads(done.stdout)["verdicts"]}
    assert v["stalls"]["status"] == "failed"
    assert v["stalls"]["where"].endswith(f"fastapi_app.py:{SLEEP_LINE}"), v["stalls"]
    assert v["upstream"]["status"] == "passed", v["upstream"]
    assert v["restart"]["status"] == "not exercised" and "URL" in v["restart"]["message"]


def test_stall_line_parsed_with_worker_and_line() -> None:
    s = parse_stall_line("event loop of worker w1 stalled 0.402s at /srv/app.py:73:report "
                         "(2 more since the last report)", 1.0)
    assert s is not None and (s.worker, s.duration, s.line, s.function, s.suppressed) == (
        "w1", 0.402, 73, "report", 2)
    assert s.cause is None, "a line without the [cause] prefix (an older corevo-obs)"
    blind = parse_stall_line("event loop of worker w0 stalled 1.000s at no project frame", 0)
    assert blind is not None and blind.file is None and blind.where == "no project frame"
    gc = parse_stall_line("[gc] event loop of worker w2 stalled 0.210s at /srv/a.py:9:f", 2.0)
    assert gc is not None and (gc.cause, gc.worker, gc.line) == ("gc", "w2", 9)
    # the lines of today's watchdog: time, pid and worker first; in progress, then the end
    now = parse_stall_line("2026-12-04T10:00:00.000Z pid=7 worker=w3 [blocking] event loop of "
                           "worker w3 STILL STALLED, 2.014s so far, at /srv/a.py:5:g", 3.0)
    assert now is not None and now.ongoing and (now.worker, now.duration, now.line) == (
        "w3", 2.014, 5)
    end = parse_stall_line("2026-12-04T10:00:09.000Z pid=7 worker=w3 [blocking] event loop of "
                           "worker w3 stalled 9.100s at /srv/a.py:5:g", 9.0)
    assert end is not None and not end.ongoing and end.duration == 9.1


# --- the report in a real browser ---------------------------------------------------
@pytest.mark.timeout(150)
def test_report_opens_in_chromium_with_plots_and_no_console_error(
        run_dir: Path, tmp_path: Path) -> None:
    chromium()  # before the run: a missing browser skips (or fails) at once
    _, out = _run("blocking", run_dir, EXAMPLE_BLOCKING="1", EXAMPLE_LATE_WRITE="1")
    page = out / "report.html"
    text = page.read_text()
    assert "<svg" in text and "http://" not in text.replace("http://www.w3.org/2000/svg", "") \
        .replace("http://127.0.0.1", ""), "self-contained: no external resource"
    png = tmp_path / "report.png"
    console = shoot(page.as_uri(), png, tmp_path / "profile", (1200, 1500))
    assert console == [], console
    w, h, pixels = rgb_pixels(png.read_bytes())
    assert (w, h) == (1200, 1500)
    lum = [sum(p) / 3 for p in pixels[::7]]
    mean = sum(lum) / len(lum)
    variance = sum((x - mean) ** 2 for x in lum) / len(lum)
    assert variance > 100, f"blank screenshot? variance {variance:.1f}"
    counts: dict[bytes, int] = {}
    for p in pixels:
        counts[p] = counts.get(p, 0) + 1
    for colour, what in (("1f77b4", "w0's lag line"), ("ff7f0e", "w1's lag line"),
                         ("d62728", "stall markers"), ("fde0dd", "the failed verdicts")):
        assert counts.get(bytes.fromhex(colour), 0) > 150, f"{what} not drawn ({colour})"
    # the check can fail: a page that logs an error is caught by the same reading
    noisy = tmp_path / "noisy.html"
    noisy.write_text("<html><body><script>console.error('planted')</script>x</body></html>")
    caught = shoot(noisy.as_uri(), tmp_path / "noisy.png", tmp_path / "profile2", (300, 200))
    assert any("planted" in c for c in caught), caught
    if os.environ.get("COREVO_KEEP_SCREENSHOT"):
        shutil.copy(png, os.environ["COREVO_KEEP_SCREENSHOT"])


def _observed(**over: Any) -> tuple[Any, Any]:
    """A workload and the observations of a run that made no evidence unless given."""
    from corevo_obs.loadtest.driver import DriverResult
    from corevo_obs.loadtest.verdicts import Observations

    w = load_workload(WORKLOAD)
    kill = {"at": 5.0, "killed_pid": 42, "worker": "w1", "replaced_after_seconds": 1.0,
            "new_pid": 43, "new_worker": "w1", "left_running": 0}
    fields: dict[str, Any] = dict(
        lag={}, stalls=[], stall_counts={}, stalls_logged=True,
        driver=DriverResult(0, "", kill=kill), offload_present=True, offload_rejected={},
        offload_waiting_max=0.0, offload_slot_wait={}, late_present=True,
        late_side_effects=0.0, cancels_requested=3.0, cancels_acknowledged={"pubsub": 0.0},
        claims_present=True, claims={"started": 5.0, "half_finished": 0.0, "reclaimed": 0.0,
                                     "terminal": {"completed": 5.0}},
        upstream_stats={})
    fields.update(over)
    return w, Observations(**fields)


def test_a_verdict_without_evidence_is_not_exercised_and_with_it_is_judged() -> None:
    from corevo_obs.loadtest.verdicts import judge

    def status(**over: Any) -> dict[str, str]:
        return {v.name: v.status for v in judge(*_observed(**over))}

    idle = status()
    # an adapter nobody called, cancels nobody acknowledged, a kill that caught nothing
    assert idle["offload"] == idle["late_side_effects"] == idle["restart"] == "not exercised"
    busy = status(offload_slot_wait={0.0005: 7.0, 0.01: 9.0, math.inf: 9.0},
                  cancels_acknowledged={"pubsub": 2.0})
    assert busy["offload"] == busy["late_side_effects"] == "passed"
    late = status(cancels_acknowledged={"marker": 1.0}, late_side_effects=1.0)
    assert late["late_side_effects"] == "failed"
    driver = _observed()[1].driver
    driver.kill = {**driver.kill, "left_running": 2}
    left = status(driver=driver, claims={"started": 5.0, "half_finished": 2.0,
                                         "reclaimed": 0.0, "terminal": {"completed": 3.0}})
    assert left["restart"] == "failed", "two claims the dead worker left were never reconciled"
    driver.kill["left_running"] = None  # the victim's files were gone: judged on the total
    assert status(driver=driver)["restart"] == "passed"
