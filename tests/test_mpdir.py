"""Compaction of dead writers' files: semantics per file type, PID reuse, CLI, health.

Writers are real processes (tests/helpers/mp_writer.py); scrapes use an unmodified
prometheus_client ``MultiProcessCollector`` unless the suite's collector is the subject.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from corevo_obs.mpdir import (
    Janitor,
    Liveness,
    LockedMultiProcessCollector,
    compact,
    compact_backlog,
    install_collectors,
    liveness,
    scan,
)
from corevo_obs.mpdir.layout import metric_files, writer_record_path

from .conftest import helper_cmd

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def run_writer(env: dict[str, str], *args: str) -> None:
    subprocess.run(helper_cmd("mp_writer.py", *args), env=env, check=True, timeout=60)


def hold_writer(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        helper_cmd("mp_writer.py", "--hold", *args), env=env, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    json.loads(proc.stdout.readline())
    return proc


def exposition(d: Path | str, collector: type = MultiProcessCollector) -> Samples:
    reg = CollectorRegistry()
    collector(reg, path=str(d))
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for m in reg.collect() for s in m.samples
    }


def fingerprint(paths: list[Path]) -> dict[str, tuple[int, int, bytes]]:
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns, p.read_bytes()) for p in paths}


def by_metric(samples: Samples, prefix: str) -> Samples:
    return {k: v for k, v in samples.items() if k[0].startswith(prefix)}


@pytest.fixture
def mpdir(worker_env: dict[str, str]) -> Path:
    return Path(worker_env["PROMETHEUS_MULTIPROC_DIR"])


def test_scrape_before_and_after_compaction_agree(worker_env, mpdir):
    for i, gauge in enumerate((5, 9, 2)):
        run_writer(worker_env, "--inc", str(i + 1), "--gauge", str(gauge), "--observe", "0.75")
    killed = hold_writer(worker_env, "--inc", "4", "--gauge", "11", "--label", "b")
    killed.kill()
    killed.wait()
    live = hold_writer(worker_env, "--inc", "2", "--gauge", "3")
    try:
        live_files = [f.path for f in metric_files(mpdir) if f.pid == live.pid]
        before_fp = fingerprint(live_files)
        before = exposition(mpdir)
        assert before[("mpt_events_total", frozenset({("kind", "a")}))] == 1 + 2 + 3 + 2
        res = compact(mpdir)
        after = exposition(mpdir)

        assert len(res.dead_writers) == 4 and live.pid not in res.dead_writers
        for prefix in ("mpt_events", "mpt_latency", "mpt_size", "mpt_g_sum", "mpt_g_max",
                       "mpt_g_min", "mpt_g_mostrecent"):
            assert by_metric(after, prefix) == by_metric(before, prefix), prefix
        assert after[("mpt_g_max", frozenset())] == 11  # the killed writer's value stays
        assert after[("mpt_g_min", frozenset())] == 2
        assert after[("mpt_g_mostrecent", frozenset())] == 3  # the newest set wins
        # live modes: the SIGKILLed writer never ran mark_process_dead; its value is gone now
        assert before[("mpt_g_livesum", frozenset())] == 11 + 3
        for mode in ("livesum", "livemax", "livemin", "livemostrecent"):
            assert after[(f"mpt_g_{mode}", frozenset())] == 3, mode
        # all / liveall: only the live pid's series remains
        for mode in ("all", "liveall"):
            pids = {dict(k[1])["pid"] for k in after if k[0] == f"mpt_g_{mode}"}
            assert pids == {str(live.pid)}, mode
        assert fingerprint(live_files) == before_fp  # a live writer's file is never touched
        assert exposition(mpdir, LockedMultiProcessCollector) == after
        names = sorted(f.path.name for f in metric_files(mpdir) if f.pid != live.pid)
        assert names == sorted(
            f"{p}_compacted.db" for p in
            ("counter", "histogram", "summary", "gauge_sum", "gauge_max", "gauge_min",
             "gauge_mostrecent")
        )
        again = compact(mpdir)  # idempotent: nothing dead left
        assert again.dead_writers == {} and exposition(mpdir) == after
    finally:
        live.communicate("\n", timeout=30)


def test_pid_reuse_is_compacted_and_live_writer_untouched(worker_env, mpdir):
    run_writer(worker_env, "--inc", "5")
    (old_pid,) = {f.pid for f in metric_files(mpdir)}
    live = hold_writer(worker_env, "--inc", "1")
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    unrecorded = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # the directory as it looks when a dead writer's pid now belongs to `stranger`
        for f in metric_files(mpdir):
            if f.pid == old_pid:
                f.path.rename(mpdir / f.path.name.replace(str(old_pid), str(stranger.pid)))
        writer_record_path(mpdir, old_pid).rename(writer_record_path(mpdir, stranger.pid))
        # and a file of a running process that never recorded its start time
        orphan = mpdir / f"counter_{unrecorded.pid}.db"
        orphan.write_bytes((mpdir / f"counter_{stranger.pid}.db").read_bytes())
        assert liveness(mpdir, stranger.pid) is Liveness.REUSED
        assert liveness(mpdir, live.pid) is Liveness.LIVE
        assert liveness(mpdir, unrecorded.pid) is Liveness.LIVE  # unproven = live
        keep = [f.path for f in metric_files(mpdir) if f.pid in (live.pid, unrecorded.pid)]
        before_fp, before = fingerprint(keep), exposition(mpdir)

        res = compact(mpdir)
        assert res.dead_writers == {stranger.pid: Liveness.REUSED}
        assert not any(f.pid == stranger.pid for f in metric_files(mpdir))
        assert not writer_record_path(mpdir, stranger.pid).exists()
        assert fingerprint(keep) == before_fp
        after = exposition(mpdir)
        for prefix in ("mpt_events", "mpt_latency", "mpt_size", "mpt_g_max"):
            assert by_metric(after, prefix) == by_metric(before, prefix), prefix
        assert before[("mpt_events_total", frozenset({("kind", "a")}))] == 5 + 1 + 5
    finally:
        for p in (stranger, unrecorded):
            p.kill()
            p.wait()
        live.communicate("\n", timeout=30)


def test_zombie_writer_counts_as_dead(worker_env, mpdir):
    proc = hold_writer(worker_env, "--inc", "2")
    os.kill(proc.pid, signal.SIGKILL)
    os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped
    try:
        assert liveness(mpdir, proc.pid) is Liveness.EXITED
        assert set(compact(mpdir).dead_writers) == {proc.pid}
    finally:
        proc.wait()


def test_corrupt_dead_file_is_left_in_place_and_scrape_survives(worker_env, mpdir, caplog):
    from corevo_obs.core.guard import reset_for_tests

    reset_for_tests()  # the log line is once per component: an earlier test may have had it
    run_writer(worker_env, "--inc", "3")
    run_writer(worker_env, "--inc", "4")
    pids = sorted({f.pid for f in metric_files(mpdir)})
    bad = mpdir / f"histogram_{pids[0]}.db"
    bad.write_bytes(b"\xff\xff\x00\x00" + b"\x00" * 60)
    res = compact(mpdir)
    assert res.unreadable == [str(bad)]
    assert bad.exists() and writer_record_path(mpdir, pids[0]).exists()
    got = exposition(mpdir, LockedMultiProcessCollector)
    assert got[("mpt_events_total", frozenset({("kind", "a")}))] == 7
    assert "unreadable" in caplog.text
    assert len(scan(mpdir).dead_writers) == 1  # still pending, reported


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "corevo_obs.cli.main", *args], env=env,
        capture_output=True, text=True, timeout=120,
    )


def test_cli_status_compact_and_errors(worker_env, mpdir, tmp_path):
    run_writer(worker_env, "--inc", "2")
    res = cli("metrics", "status", str(mpdir), "--format", "json", env=worker_env)
    assert res.returncode == 0, res.stderr
    st = json.loads(res.stdout)
    assert len(st["dead_writers"]) == 1 and st["metric_files"] >= 8
    res = cli("metrics", "compact", str(mpdir), env=worker_env)
    assert res.returncode == 0 and "compacted 1 dead writers" in res.stdout
    res = cli("metrics", "status", str(mpdir), env=worker_env)
    assert "dead writers  0" in res.stdout and "compactions   1" in res.stdout
    for args in (("compact", str(tmp_path / "missing")), ("status", str(mpdir / "nope"))):
        res = cli("metrics", *args, env=worker_env)
        assert res.returncode == 2 and "no such directory" in res.stderr
        assert "Traceback" not in res.stderr
    blocked = tmp_path / "blocked"
    blocked.mkdir()
    (blocked / ".corevo").write_text("a file where the state directory should be")
    for action in ("compact", "status"):
        res = cli("metrics", action, str(blocked), env=worker_env)
        assert res.returncode == 2 and "where a directory belongs" in res.stderr, res.stderr
        assert "Traceback" not in res.stderr and res.stderr.count("\n") == 1
    (mpdir / "counter_999999.db").write_bytes(b"\x00\x01\x00\x00garbage")
    res = cli("metrics", "compact", str(mpdir), env=worker_env)
    assert res.returncode == 1 and "counter_999999.db" in res.stderr
    assert "Traceback" not in res.stderr and (mpdir / "counter_999999.db").exists()


def test_health_metrics_and_janitor(worker_env, mpdir):
    for _ in range(3):
        run_writer(worker_env)
    reg = CollectorRegistry()
    install_collectors(reg, mpdir)
    assert reg.get_sample_value("corevo_metrics_dir_dead_writers") == 3
    files_before = reg.get_sample_value("corevo_metrics_dir_files")
    assert files_before is not None and files_before >= 3 * 8
    assert reg.get_sample_value("corevo_metrics_compactions_total") == 0
    janitor = Janitor(mpdir, interval=0.05).start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and janitor.runs < 3:
            time.sleep(0.02)
    finally:
        janitor.close()
    assert reg.get_sample_value("corevo_metrics_compactions_total") == 1
    assert reg.get_sample_value("corevo_metrics_dir_dead_writers") == 0
    assert reg.get_sample_value("corevo_metrics_dir_files") == 7  # accumulators only
    assert 0 < reg.get_sample_value("corevo_metrics_last_compaction_seconds") < 10
    assert reg.get_sample_value("mpt_events_total", {"kind": "a"}) == 3


def test_exit_hook_compacts_above_threshold(worker_env, mpdir):
    env = dict(worker_env, COREVO_COMPACT_AT_EXIT="3")
    for _ in range(3):
        run_writer(env)
    assert len(scan(mpdir).dead_writers) == 3  # each exiting writer saw fewer than 3 dead
    run_writer(env)  # sees 3 dead: compacts them (its own files wait: it is still alive)
    st = scan(mpdir)
    assert len(st.dead_writers) == 1 and st.stats.compactions == 1
    assert exposition(mpdir)[("mpt_events_total", frozenset({("kind", "a")}))] == 4
    res = subprocess.run(helper_cmd("mp_writer.py"), env=dict(worker_env,
                         COREVO_COMPACT_AT_EXIT="x"), capture_output=True, text=True)
    assert res.returncode != 0 and "COREVO_COMPACT_AT_EXIT" in res.stderr


def test_metrics_server_janitor_compacts_and_serves_health(worker_env, mpdir, monkeypatch):
    from corevo_obs import MetricsServer

    for _ in range(2):
        run_writer(worker_env, "--inc", "2")
    killed = hold_writer(worker_env, "--inc", "3")
    killed.kill()
    killed.wait()
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(mpdir))
    with MetricsServer(port=0, compact_every=0.05) as server:
        # the dead writer's files go at the commit; the janitor counts the compaction just
        # after it: poll what a scrape shows, not the directory (a loaded 3.13 run read
        # between the two)
        deadline = time.monotonic() + 20
        while True:
            with urllib.request.urlopen(server.url, timeout=5) as resp:
                body = resp.read().decode()
            done = not scan(mpdir).dead_writers and "corevo_metrics_compactions_total 1.0" in body
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.05)
    assert 'mpt_events_total{kind="a"} 7.0' in body
    assert "corevo_metrics_dir_dead_writers 0.0" in body
    assert "corevo_metrics_compactions_total 1.0" in body
    assert "mpt_g_livesum" not in body  # the SIGKILLed writer's live gauge is gone


def test_pid_taken_by_a_new_writer_before_commit_aborts_it(worker_env, mpdir, monkeypatch):
    """A suite writer that registers on a recycled pid between judgement and commit."""
    import corevo_obs.mpdir.compactor as compactor
    from corevo_obs.mpdir.writers import WriterRecord, boot_id, pid_namespace, proc_state

    run_writer(worker_env, "--inc", "5")
    (old_pid,) = {f.pid for f in metric_files(mpdir)}
    newcomer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        for f in metric_files(mpdir):
            f.path.rename(mpdir / f.path.name.replace(str(old_pid), str(newcomer.pid)))
        writer_record_path(mpdir, old_pid).rename(writer_record_path(mpdir, newcomer.pid))
        before = exposition(mpdir)
        real_plan = compactor._plan

        def plan_then_newcomer_registers(*args):
            out = real_plan(*args)
            state = proc_state(newcomer.pid)
            assert state is not None
            rec = WriterRecord(boot_id(), pid_namespace(), state.start_ticks)
            writer_record_path(mpdir, newcomer.pid).write_text(rec.encode())
            return out

        monkeypatch.setattr(compactor, "_plan", plan_then_newcomer_registers)
        res = compact(mpdir)
        assert res.dead_writers == {} and res.folded_files == 0
        assert exposition(mpdir) == before  # nothing committed, nothing lost or doubled
        assert {f.pid for f in metric_files(mpdir)} == {newcomer.pid}
        assert not list((mpdir / ".corevo").glob("*.tmp"))
    finally:
        newcomer.kill()
        newcomer.wait()


def test_backlog_drains_in_batches_with_exact_totals(worker_env, mpdir):
    res = subprocess.run(helper_cmd("mp_churn.py", "--total", "30", "--batch", "10"),
                         env=dict(worker_env, COREVO_COMPACT_AT_EXIT="0"), check=True,
                         capture_output=True, text=True, timeout=120)
    increments = json.loads(res.stdout)["increments"]

    def events() -> float:
        got = exposition(mpdir, LockedMultiProcessCollector)
        return sum(v for k, v in got.items() if k[0] == "mpt_events_total")

    first = compact(mpdir, max_writers=10)
    assert len(first.dead_writers) == 10 and first.pending == 21  # 30 children + parent
    assert events() == increments
    rest = compact_backlog(mpdir, max_writers=8)
    assert len(rest.dead_writers) == 21 and rest.pending == 0
    assert events() == increments and scan(mpdir).stats.compactions == 1 + 3


def test_records_from_another_boot_or_pid_namespace(mpdir):
    from corevo_obs.mpdir.writers import WriterRecord, boot_id, pid_namespace

    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        rec = writer_record_path(mpdir, sleeper.pid)
        rec.parent.mkdir(parents=True)
        rec.write_text(WriterRecord("another-boot", pid_namespace(), 1).encode())
        assert liveness(mpdir, sleeper.pid) is Liveness.GONE
        rec.write_text(WriterRecord(boot_id(), "pid:[1]", 1).encode())
        assert liveness(mpdir, sleeper.pid) is Liveness.LIVE  # not ours to judge
        rec.write_text("garbage")
        assert liveness(mpdir, sleeper.pid) is Liveness.LIVE  # unproven
    finally:
        sleeper.kill()
        sleeper.wait()
    assert liveness(mpdir, sleeper.pid) is Liveness.GONE


def test_the_exit_threshold_argument_wins_over_the_environment(worker_env, mpdir):
    """``enable_multiprocess(compact_at_exit=N)`` (what the gunicorn hooks pass): the
    environment's bad value is not read; a bad argument is refused with its name."""
    code = ("import sys\nfrom corevo_obs import enable_multiprocess\n"
            "from corevo_obs.mpdir import hooks\n"
            "enable_multiprocess(compact_at_exit=int(sys.argv[1]))\n"
            "print(hooks._state['threshold'])\n")
    env = dict(worker_env, COREVO_COMPACT_AT_EXIT="x")
    ok = subprocess.run([sys.executable, "-c", code, "5"], env=env, capture_output=True,
                        text=True)
    assert ok.returncode == 0 and ok.stdout.strip() == "5", ok.stderr
    bad = subprocess.run([sys.executable, "-c", code, "-1"], env=env, capture_output=True,
                         text=True)
    assert bad.returncode != 0 and "compact_at_exit=-1" in bad.stderr
