"""Real processes race for jobs, get frozen with SIGSTOP, get SIGKILLed (SQLite and PG)."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from tests.conftest import helper_cmd
from tests.test_claims import backend  # noqa: F401 - the fixture

RACE_JOBS = 1200
BATCH = 40
FROZEN_JOBS = 20


def _spawn(name, backend, worker, n, *extra, env):  # noqa: F811
    return subprocess.Popen(
        helper_cmd(name, backend.dialect, backend.target, backend.table, worker, str(n), *extra),
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )


def _line(proc):
    line = proc.stdout.readline()
    assert line, f"helper exited early with {proc.wait()}"
    return json.loads(line)


def _proc_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@pytest.mark.parametrize("api", ["sync", "async"])
def test_two_processes_race_for_every_job_exactly_one_wins(backend, worker_env, api):  # noqa: F811
    """``async``: the racers await AsyncSqliteJobStore / AsyncPostgresJobStore claims."""
    jobs = backend.store()
    for i in range(RACE_JOBS):
        jobs.create_job(f"job-{i:05d}")
    extra = ["async"] if api == "async" else []
    racers = [_spawn("claim_racer.py", backend, w, RACE_JOBS, str(BATCH), *extra,
                     env=worker_env) for w in ("ra", "rb")]
    try:
        owners = [_line(p)["owner"] for p in racers]
        for _ in range(0, RACE_JOBS, BATCH):  # release both together: every batch a race
            for p in racers:
                p.stdin.write("go\n")
                p.stdin.flush()
            for p in racers:
                assert p.stdout.readline().strip() == "done"
        results = [_line(p) for p in racers]
        assert [p.wait(timeout=60) for p in racers] == [0, 0]
    finally:
        for p in racers:
            if p.poll() is None:
                p.kill()
    won = [set(r["won"]) for r in results]
    assert not won[0] & won[1], "a job was claimed twice"
    assert won[0] | won[1] == {f"job-{i:05d}" for i in range(RACE_JOBS)}
    assert min(map(len, won)) >= RACE_JOBS // 50, f"barely a race: {[len(w) for w in won]}"
    for r, w in zip(results, won, strict=True):   # each process's metrics agree with the DB
        assert r["metric_won"] == len(w) == r["queue_waits"]
        assert r["metric_lost"] == RACE_JOBS - len(w)
    rows, _ = jobs.db.run(f"SELECT owner, COUNT(*), MIN(epoch), MAX(epoch) FROM {jobs.table}"
                          " GROUP BY owner ORDER BY owner", {})
    by_owner = {owner: (n, lo, hi) for owner, n, lo, hi in rows}   # the DB's own account
    assert by_owner == {owners[0]: (len(won[0]), 1, 1), owners[1]: (len(won[1]), 1, 1)}
    print(f"{backend.dialect} race: {len(won[0])} / {len(won[1])} of {RACE_JOBS}")


@pytest.mark.parametrize("api", ["sync", "async"])
def test_frozen_worker_loses_its_claims_and_its_late_start_is_fenced(
        backend, worker_env, registry, api):  # noqa: F811
    jobs = backend.store(owner="rescuer")
    for i in range(FROZEN_JOBS):
        jobs.create_job(f"job-{i:05d}")
    extra = ["--async"] if api == "async" else []
    frozen = _spawn("claim_worker.py", backend, "wf", FROZEN_JOBS, "--pause", "2.0", *extra,
                    env=worker_env)
    try:
        claimed = _line(frozen)
        frozen.send_signal(signal.SIGSTOP)         # frozen before execution_started
        deadline = time.monotonic() + 5
        while _proc_state(frozen.pid) != "T":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        old_epochs = {c["epoch"] for c in claimed["claims"]}
        # The claim timeout passed: its unstarted claims go back to the queue.
        assert jobs.reclaim_prestart(claimed_before=jobs.clock()) == FROZEN_JOBS
        for c in claimed["claims"]:
            mine = jobs.claim(c["job_id"]).claim
            assert mine is not None and mine.epoch == c["epoch"] + 1
            assert jobs.start(mine, f"rescue-{c['job_id']}").started
        frozen.send_signal(signal.SIGCONT)
        late = _line(frozen)
        assert frozen.wait(timeout=30) == 0
    finally:
        if frozen.poll() is None:
            frozen.kill()
    assert old_epochs == {1}
    assert late["outcomes"] == ["fenced"] * FROZEN_JOBS       # 0 rows every time
    assert (late["metric_fenced"], late["metric_started"]) == (FROZEN_JOBS, 0)
    for c in claimed["claims"]:
        row = jobs.get(c["job_id"])
        assert (row.state, row.owner, row.epoch) == ("running", "rescuer", 2)
        assert row.execution_id == f"rescue-{c['job_id']}"
    assert registry.get_sample_value("corevo_claim_reclaimed_total", {"worker": "w0"}) == (
        FROZEN_JOBS)


@pytest.mark.parametrize("started", [False, True])
def test_killed_owner_unstarted_claims_requeue_running_jobs_become_lost(
        backend, worker_env, started):  # noqa: F811
    jobs = backend.store(owner="survivor")
    n = 5
    for i in range(n):
        jobs.create_job(f"job-{i:05d}")
    args = ["--pause", "0", "--hang"] if started else ["--pause", "3600"]
    victim = _spawn("claim_worker.py", backend, "wk", n, *args, env=worker_env)
    try:
        owner = _line(victim)["owner"]
        if started:
            assert _line(victim)["outcomes"] == ["started"] * n
        assert jobs.recover().reclaimed == 0        # the owner still runs: nothing to do
        victim.send_signal(signal.SIGKILL)
        victim.wait()
    finally:
        if victim.poll() is None:
            victim.kill()
    rec = jobs.recover()                            # owner ids name the dead pid
    if started:
        assert (rec.reclaimed, rec.lost) == (0, n)
        assert not any(jobs.claim(f"job-{i:05d}").won for i in range(n))  # never re-run
        assert {jobs.get(f"job-{i:05d}").state for i in range(n)} == {"lost"}
    else:
        assert (rec.reclaimed, rec.lost) == (n, 0)
        assert all(jobs.claim(f"job-{i:05d}").claim.epoch == 2 for i in range(n))
    assert owner.startswith("wk@") and str(victim.pid) in owner
