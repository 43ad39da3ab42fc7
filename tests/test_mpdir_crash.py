"""A compactor SIGKILLed at any point leaves a directory that scrapes exactly, and a rerun
finishes the job. Real processes and real SIGKILLs: at the two exact stages the compactor
(tests/helpers/mp_crash_compactor.py) kills itself; at random moments the test kills the
CLI compactor from outside once it sees it holding the compactors' lock."""

from __future__ import annotations

import fcntl
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from corevo_obs.mpdir import LockedMultiProcessCollector, scan
from corevo_obs.mpdir.layout import COMPACT_LOCK_FILE, STATE_DIR

from .conftest import helper_cmd


def churn(env: dict[str, str], total: int) -> int:
    """``total`` dead writers (a quarter SIGKILLed), no exit compaction; the increments."""
    res = subprocess.run(
        helper_cmd("mp_churn.py", "--total", str(total), "--batch", "25", "--inc", "3"),
        env=dict(env, COREVO_COMPACT_AT_EXIT="0"), capture_output=True, text=True, timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return int(json.loads(res.stdout.strip().splitlines()[-1])["increments"])


def totals(d: Path, collector: type = LockedMultiProcessCollector) -> tuple[float, float]:
    reg = CollectorRegistry()
    collector(reg, path=str(d))
    events = sum(reg.get_sample_value("mpt_events_total", {"kind": k}) or 0
                 for k in ("odd", "even"))
    return events, reg.get_sample_value("mpt_latency_seconds_count") or 0


def compactor(env: dict[str, str], d: Path, die_at: str | None = None) -> subprocess.Popen[str]:
    cmd = ([sys.executable, "-m", "corevo_obs.cli.main", "metrics", "compact", str(d)]
           if die_at is None else helper_cmd("mp_crash_compactor.py", "--die-at", die_at, str(d)))
    return subprocess.Popen(
        cmd, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def wait_until_compacting(d: Path, proc: subprocess.Popen[str]) -> None:
    """Return once ``proc`` holds the compactors' lock (or has already finished)."""
    path = d / STATE_DIR / COMPACT_LOCK_FILE
    while proc.poll() is None:
        if path.exists():
            fd = os.open(path, os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            finally:
                os.close(fd)
        time.sleep(0.002)


@pytest.mark.parametrize("stage", ["before_commit", "after_rename"])
def test_compactor_killed_at_each_stage(worker_env, stage):
    d = Path(worker_env["PROMETHEUS_MULTIPROC_DIR"])
    expected = churn(worker_env, 60)
    proc = compactor(worker_env, d, die_at=stage)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, err
    leftovers = list((d / STATE_DIR).glob("*_compacted.db.tmp"))
    assert bool(leftovers) is (stage == "before_commit")  # written aside, never committed
    assert scan(d).journal_pending is (stage == "after_rename")
    if stage == "after_rename":
        # an unlocked reader would now count the accumulator AND the dead files...
        assert totals(d, MultiProcessCollector)[0] > expected
    # ...the suite's collector rolls the journal forward first and counts each once
    assert totals(d) == (expected, expected)
    assert not scan(d).journal_pending
    assert totals(d, MultiProcessCollector) == (expected, expected)
    proc = compactor(worker_env, d)
    proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert totals(d) == (expected, expected)
    assert scan(d).dead_writers == {}


def test_compactor_killed_at_random_moments(worker_env):
    d = Path(worker_env["PROMETHEUS_MULTIPROC_DIR"])
    rng = random.Random(11)
    expected = 0
    outcomes = []
    for i in range(6):
        expected += churn(worker_env, 100)
        proc = compactor(worker_env, d)
        wait_until_compacting(d, proc)
        time.sleep(0.0 if i == 0 else rng.uniform(0.0, 0.08))  # the first: surely mid-run
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
        outcomes.append(proc.returncode)
        assert totals(d) == (expected, expected), outcomes
    assert -signal.SIGKILL in outcomes  # at least one kill landed mid-compaction
    proc = compactor(worker_env, d)
    proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert totals(d) == (expected, expected)
    assert totals(d, MultiProcessCollector) == (expected, expected)
    assert scan(d).dead_writers == {}


def test_a_journal_that_appears_before_the_scrape_locks_is_rolled_forward(
        worker_env, monkeypatch):
    """The crash lands between the scrape's first look for a journal and its shared lock:
    here the first look is made to miss it. The look under the lock must catch it."""
    import corevo_obs.mpdir.journal as journal

    d = Path(worker_env["PROMETHEUS_MULTIPROC_DIR"])
    expected = churn(worker_env, 20)
    proc = compactor(worker_env, d, die_at="after_rename")
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL and scan(d).journal_pending
    real, looks = journal.recover_if_needed, []

    def first_look_misses(directory: Path, **kw: float) -> bool:
        looks.append(directory)
        return False if len(looks) == 1 else real(directory, **kw)

    monkeypatch.setattr(journal, "recover_if_needed", first_look_misses)
    assert totals(d) == (expected, expected)
    assert len(looks) >= 2 and not scan(d).journal_pending
