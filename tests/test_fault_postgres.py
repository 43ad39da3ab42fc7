"""PostgreSQL faults on a private cluster: immediate stop + restart, SIGSTOP, lost replies.

The cluster is this module's own (initdb in a temp dir, free port, fsync off), because the
tests stop, kill and freeze it. Every claim must end within its configured bound with a
``BackendUnavailable`` while the server cannot answer, succeed again soon after it is
back, and no job may be won twice — checked against the workers' own records.
The measured figures are printed (``-s``) for bench/README.md.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from corevo_obs.cancel import CommandGateway, SqliteCancelBus
from corevo_obs.claims import ClaimOutcome, JobStore, PostgresJobStore
from corevo_obs.claims.postgres import DEADLINE_GRACE
from corevo_obs.core.errors import BackendUnavailable, ConfigError
from tests.conftest import helper_cmd
from tests.helpers.pg_cluster import PgCluster, running_cluster, wait_until
from tests.helpers.pg_proxy import PgProxy

FAST: dict[str, Any] = {"statement_timeout": 1.0, "pool_timeout": 1.0,
                        "connect_timeout": 2, "reconnect_timeout": 2.0}
#: pool wait + client deadline: the longest one call may take
BOUND = FAST["pool_timeout"] + FAST["statement_timeout"] + DEADLINE_GRACE
SLACK = 0.6
#: after the server is back: the pool's retry gives up within reconnect_timeout, the next
#: request connects at once
RECOVER_WITHIN = FAST["reconnect_timeout"] + BOUND + 2.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[PgCluster]:
    with running_cluster() as c:
        yield c


@pytest.fixture
def cluster_up(cluster: PgCluster) -> PgCluster:
    """The cluster running again, whatever the previous test left."""
    if not cluster.running():
        cluster.start()
    return cluster


def _store(dsn: str, registry: CollectorRegistry, worker: str, table: str,
           **opts: Any) -> JobStore:
    return PostgresJobStore(dsn, table=table, worker=worker, registry=registry,
                            **{**FAST, **opts})


def _timed(fn: Callable[[], ClaimOutcome]) -> tuple[float, ClaimOutcome | BackendUnavailable]:
    t0 = time.monotonic()
    try:
        result: ClaimOutcome | BackendUnavailable = fn()
    except BackendUnavailable as exc:
        result = exc
    return time.monotonic() - t0, result


def _errors(registry: CollectorRegistry, worker: str) -> float:
    return registry.get_sample_value("corevo_instrumentation_errors_total",
                                     {"worker": worker, "component": "claims-db"}) or 0.0


def _recover(store: JobStore, jobs: Iterator[str], *, want_won: bool = True
             ) -> tuple[float, ClaimOutcome]:
    """Claim until one is decided; every failed attempt must still end within the bound."""
    t0 = time.monotonic()
    while True:
        took, result = _timed(lambda: store.claim(next(jobs)))
        assert took <= BOUND + SLACK, f"a claim took {took:.2f}s"
        if isinstance(result, ClaimOutcome):
            assert result.won or not want_won
            return time.monotonic() - t0, result
        assert time.monotonic() - t0 < RECOVER_WITHIN, f"no recovery: {result}"
        time.sleep(0.05)


def test_immediate_stop_fails_fast_and_the_pool_reconnects_after_restart(
        cluster_up: PgCluster, registry: CollectorRegistry) -> None:
    store = _store(cluster_up.dsn, registry, "fa", f"jobs_{uuid.uuid4().hex[:8]}")
    jobs = iter([store.create_job() for _ in range(60)])
    assert store.claim(next(jobs)).won
    cluster_up.stop("immediate")
    down_at = time.monotonic()
    failures: list[float] = []
    while time.monotonic() - down_at < 2.0:
        took, result = _timed(lambda: store.claim(next(jobs)))
        assert isinstance(result, BackendUnavailable), result
        assert result.backend == "postgresql" and not result.maybe_committed
        failures.append(took)
    start_at = time.monotonic()
    cluster_up.start()
    starting = time.monotonic() - start_at
    recovered, won = _recover(store, jobs)
    outage = time.monotonic() - down_at
    assert won.claim is not None and won.claim.epoch == 1
    assert max(failures) <= BOUND + SLACK
    assert _errors(registry, "fa") >= len(failures)
    print(f"\n[pg immediate stop, 2 s down] errors while down: {len(failures)}, "
          f"time to error max {max(failures):.2f}s (bound {BOUND:.1f}s); "
          f"pg_ctl start took {starting:.2f}s, then time to recover {recovered:.2f}s; "
          f"first claim won {outage:.2f}s after the stop")
    store.close()


def test_sigstopped_server_ends_each_claim_within_the_bound_then_recovers(
        cluster_up: PgCluster, registry: CollectorRegistry) -> None:
    store = _store(cluster_up.dsn, registry, "fb", f"jobs_{uuid.uuid4().hex[:8]}")
    jobs = iter([store.create_job() for _ in range(60)])
    mine = [store.claim(next(jobs)).claim]
    pids = cluster_up.freeze()
    frozen_at = time.monotonic()
    failures: list[float] = []
    unanswered = 0     # statements sent to the frozen server: each one may commit later
    try:
        while time.monotonic() - frozen_at < 8.0 - BOUND:
            took, result = _timed(lambda: store.claim(next(jobs)))
            assert isinstance(result, BackendUnavailable), result
            failures.append(took)
            unanswered += result.maybe_committed
        time.sleep(max(0.0, 8.0 - (time.monotonic() - frozen_at)))
    finally:
        cluster_up.thaw(pids)
    recovered, won = _recover(store, jobs)
    mine.append(won.claim)
    assert max(failures) <= BOUND + SLACK, failures
    assert _errors(registry, "fb") >= len(failures)
    # A statement that sat unread in the frozen backend's socket runs after SIGCONT and
    # may commit: its claim names this owner with a token nobody holds. Never a second
    # winner, and the store gives back exactly those (it kept their tokens).
    for claim in mine:
        assert claim is not None and store.start(claim).started
    rows, _ = store.db.run(f"SELECT id, token FROM {store.table} WHERE owner IS NOT NULL "
                           "AND state = 'queued'", {})
    orphans = [job for job, _ in rows]
    assert 0 < unanswered <= FAST.get("pool_size", 4)   # one per pooled connection
    assert len(store.undecided) == unanswered
    assert store.give_back_undecided() == len(orphans) <= unanswered
    assert not store.undecided
    for job in orphans:
        again = store.claim(job).claim
        assert again is not None and again.epoch == 2
    print(f"\n[pg SIGSTOP 8 s] errors while frozen: {len(failures)}, time to error max "
          f"{max(failures):.2f}s (bound {BOUND:.1f}s, not 8 s); time to recover after "
          f"SIGCONT {recovered:.2f}s; claims committed after the client gave up "
          f"{len(orphans)} of {unanswered} unanswered, all given back")
    store.close()


def test_a_reply_lost_after_commit_is_read_back_never_claimed_twice(
        cluster_up: PgCluster, registry: CollectorRegistry) -> None:
    proxy = PgProxy(cluster_up.port)
    table = f"jobs_{uuid.uuid4().hex[:8]}"
    store = _store(proxy.dsn(), registry, "fc", table)
    try:
        job, other = store.create_job(), store.create_job()
        proxy.cut_reply_to(b"SET owner")          # the CLAIM's UPDATE commits, reply lost
        won = store.claim(job)
        assert proxy.cuts == 1 and won.claim is not None and won.claim.epoch == 1
        row = store.get(job)
        assert row is not None and row.token == won.claim.token   # the read-back found it
        assert not store.claim(job).won             # a retry by the same worker: lost
        assert _errors(registry, "fc") == 1
        # The read-back cannot reach the server either: the claim is undecided and says
        # so; the row may name us with a token nobody holds, until a reclaim.
        proxy.cut_reply_to(b"SET owner", then_refuse=True)
        with pytest.raises(BackendUnavailable) as undecided:
            store.claim(other)
        assert undecided.value.maybe_committed
        assert list(store.undecided) == [other]
        proxy.refuse = False
        _, retried = _recover(store, iter([other] * 100), want_won=False)
        assert not retried.won                      # it had committed: never a 2nd win
        assert store.give_back_undecided() == 1     # by its token: the unstarted claim
        assert store.get(job).owner == store.owner  # type: ignore[union-attr]
        assert store.claim(other).claim.epoch == 2  # type: ignore[union-attr]
    finally:
        store.close()
        proxy.close()


def _spawn_worker(dsn: str, table: str, worker: str, env: dict[str, str]
                  ) -> subprocess.Popen[str]:
    return subprocess.Popen(helper_cmd("pg_claim_worker.py", dsn, table, worker, "2", "0.02"),
                            env=env, stdout=subprocess.PIPE, text=True)


def test_workers_racing_through_a_restart_never_win_a_job_twice(
        cluster_up: PgCluster, registry: CollectorRegistry, worker_env: dict[str, str],
        tmp_path: Path) -> None:
    n = 300
    table = f"jobs_{uuid.uuid4().hex[:8]}"
    jobs = _store(cluster_up.dsn, registry, "parent", table)
    for i in range(n):
        jobs.create_job(f"job-{i:05d}")
    queued = jobs.create_local("cx-queued")                # claimed, never started
    running = jobs.create_local("cx-running")
    assert jobs.start(running, "cx-exec").started
    wins: list[dict[str, Any]] = []
    summaries: list[dict[str, Any]] = []
    lock = threading.Lock()
    procs = [_spawn_worker(cluster_up.dsn, table, w, worker_env) for w in ("wa", "wb")]

    def read(proc: subprocess.Popen[str], worker: str) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            rec = json.loads(line)
            with lock:
                if "won" in rec:
                    wins.append({**rec, "worker": worker, "at": time.monotonic()})
                else:
                    summaries.append(rec)

    readers = [threading.Thread(target=read, args=(p, w)) for p, w in zip(
        procs, ("wa", "wb"), strict=True)]
    for t in readers:
        t.start()
    try:
        wait_until(lambda: len(wins) >= n // 4, within=30)
        before = len(wins)
        cluster_up.stop("immediate")
        time.sleep(2.0)
        cluster_up.start()
        up_at = time.monotonic()
        wait_until(lambda: any(w["at"] > up_at for w in wins), within=RECOVER_WITHIN)
        recovered = min(w["at"] for w in wins if w["at"] > up_at) - up_at
        assert [p.wait(timeout=60) for p in procs] == [0, 0]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        for t in readers:
            t.join(timeout=10)
    assert before < n * 3 // 4, "the restart did not land mid-run"
    owners = {s["done"]: s["owner"] for s in summaries}
    twice = [job for job, c in Counter(w["won"] for w in wins).items() if c > 1]
    assert not twice, f"won twice: {twice}"
    rows, _ = jobs.db.run(f"SELECT id, owner, token, state FROM {table}"
                          " WHERE id LIKE 'job-%'", {})
    table_rows = {job: (owner, token, state) for job, owner, token, state in rows}
    for w in wins:   # every record the workers hold is the row's current claim
        assert table_rows[w["won"]][:2] == (owners[w["worker"]], w["token"]), w
    recorded = {w["won"] for w in wins}
    orphans = {job for job, (owner, _, state) in table_rows.items()
               if job not in recorded and owner is not None}
    assert recorded == set(table_rows), f"not won by anyone: {set(table_rows) - recorded}"
    assert not orphans    # each claim whose reply was lost was given back and won again
    given_back = sum(s["given_back"] for s in summaries)
    unstarted = sum(len(s["unstarted"]) for s in summaries)
    states = Counter(state for _, _, state in table_rows.values())
    assert max(s["max_error_s"] for s in summaries) <= 2 * BOUND + SLACK
    # The cancel routing reads the job table through the same store, opened before the
    # restart: it must work on the new server without a process restart.
    bus = SqliteCancelBus(tmp_path / "bus.db")
    gateway = CommandGateway(bus, jobs)

    async def cancels() -> tuple[str, str, float | None]:
        first = await gateway.cancel(queued.job_id)
        second = await gateway.cancel(running.job_id)
        assert second.command is not None and second.command.owner == jobs.owner
        assert second.command.epoch == 1 and second.command.execution_id == "cx-exec"
        return first.outcome, second.outcome, await bus.marker("cx-exec")

    first, second, marker = asyncio.run(cancels())
    assert (first, second) == ("cancelled_queued", "routed") and marker is not None
    asyncio.run(bus.aclose())
    print(f"\n[pg restart mid-race, 2 workers x 2 lanes, {n} jobs] wins "
          f"{Counter(w['worker'] for w in wins)}, won twice 0, final states {dict(states)}, "
          f"unstarted after an error {unstarted}, undecided claims given back and "
          f"won again {given_back}, "
          f"errors {sum(s['errors'] for s in summaries)}, time to error max "
          f"{max(s['max_error_s'] for s in summaries):.2f}s, time to recover after "
          f"restart {recovered:.2f}s; cancel routing after restart ok")
    jobs.close()


def test_bad_timeouts_are_refused_with_the_option_named() -> None:
    for bad in ({"statement_timeout": 0}, {"pool_timeout": float("nan")},
                {"connect_timeout": 1}, {"pool_size": 0}):
        with pytest.raises(ConfigError, match=next(iter(bad))):
            PostgresJobStore("postgresql://127.0.0.1:1/x", **bad)
