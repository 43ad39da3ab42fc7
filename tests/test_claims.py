"""The claim protocol on a real SQLite file and a real PostgreSQL, same SQL, same answers."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest

from corevo_obs.claims import JobStore, PostgresJobStore, SqliteJobStore
from corevo_obs.claims.sql import to_pyformat
from corevo_obs.core.errors import ConfigError


@dataclass
class Backend:
    """Where one test's job table lives, and a way to open more stores on it."""

    dialect: str
    target: str
    table: str
    registry: Any
    opened: list[JobStore] = field(default_factory=list)

    def store(self, **opts: Any) -> JobStore:
        opts = {"table": self.table, "worker": "w0", "registry": self.registry, **opts}
        make = SqliteJobStore if self.dialect == "sqlite" else PostgresJobStore
        s = make(self.target, **opts)
        self.opened.append(s)
        return s


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request, tmp_path, registry):
    table = f"jobs_{uuid.uuid4().hex[:10]}"
    if request.param == "sqlite":
        b = Backend("sqlite", str(tmp_path / "jobs.db"), table, registry)
    else:
        b = Backend("postgres", request.getfixturevalue("pg_dsn"), table, registry)
    yield b
    if b.dialect == "postgres" and b.opened:
        b.opened[0].db.run(f"DROP TABLE IF EXISTS {table}", {})
    for s in b.opened:
        s.close()


def count(registry, name, **labels):
    return registry.get_sample_value(name, {"worker": "w0", **labels}) or 0.0


def test_exactly_one_claim_wins_and_epoch_token_fence_the_start(backend, registry):
    a, b = backend.store(owner="A"), backend.store(owner="B")
    job = a.create_job(payload="{}")
    first, second = a.claim(job), b.claim(job)
    assert first.won and first.outcome == "won" and first.claim.epoch == 1
    assert not second.won and second.outcome == "lost"
    forged = type(first.claim)(job, "A", 1, "not-the-token", first.claim.claimed_at)
    assert a.start(forged).outcome == "fenced"
    started = a.start(first.claim, "exec-1")
    assert started.started and started.execution_id == "exec-1"
    assert a.start(first.claim).outcome == "fenced"    # already running: no second start
    row = a.get(job)
    assert (row.state, row.owner, row.epoch, row.execution_id) == ("running", "A", 1, "exec-1")
    assert count(registry, "corevo_claim_total", outcome="won") == 1
    assert count(registry, "corevo_claim_total", outcome="lost") == 1
    assert count(registry, "corevo_claim_start_total", outcome="started") == 1
    assert count(registry, "corevo_claim_start_total", outcome="fenced") == 2
    assert count(registry, "corevo_claim_queue_wait_seconds_count") == 1
    assert count(registry, "corevo_claim_to_start_seconds_count") == 1
    assert count(registry, "corevo_job_dispatch_path_total", path="queued") == 1


def test_prestart_reclaim_requeues_with_a_new_epoch_and_fences_the_old_owner(backend, registry):
    jobs = backend.store()
    job = jobs.create_job()
    old = jobs.claim(job, owner="A").claim
    assert jobs.reclaim_prestart(owner="B") == 0        # not B's
    assert jobs.reclaim_prestart(owner="A") == 1
    new = jobs.claim(job, owner="C").claim
    assert new is not None and new.epoch == 2 and new.token != old.token
    assert jobs.start(old).outcome == "fenced"          # the late start matches nothing
    assert jobs.start(new).started
    assert jobs.reclaim_prestart(owner="C") == 0        # started: past the recovery boundary
    assert count(registry, "corevo_claim_reclaimed_total") == 1


def test_reclaim_by_claim_age(backend):
    t = [1000.0]
    jobs = backend.store(clock=lambda: t[0])
    old_job, new_job = jobs.create_job(), jobs.create_job()
    jobs.claim(old_job, owner="A")
    t[0] += 10
    jobs.claim(new_job, owner="A")
    assert jobs.reclaim_prestart(claimed_before=1005.0) == 1
    assert jobs.get(old_job).owner is None and jobs.get(new_job).owner == "A"
    with pytest.raises(ValueError):
        jobs.reclaim_prestart()


def test_running_job_of_a_vanished_owner_becomes_lost_never_rerun(backend, registry):
    jobs = backend.store()
    job = jobs.create_job()
    claim = jobs.claim(job, owner="A").claim
    jobs.start(claim, "exec-1")
    assert jobs.reclaim_prestart(owner="A") == 0
    assert jobs.mark_lost(owner="A") == 1
    assert jobs.get(job).state == "lost"
    assert not jobs.claim(job, owner="B").won
    assert not jobs.finish(claim, "exec-1", "completed")  # a late completion changes nothing
    assert jobs.get(job).state == "lost"
    assert count(registry, "corevo_job_terminal_total", state="lost") == 1
    assert count(registry, "corevo_job_terminal_total", state="completed") == 0


def test_terminal_transitions_carry_the_execution_identity(backend, registry):
    jobs = backend.store()
    job = jobs.create_job()
    claim = jobs.claim(job).claim
    jobs.start(claim, "exec-1")
    assert not jobs.finish(claim, "exec-other", "completed")
    assert jobs.finish(claim, "exec-1", "failed")
    assert not jobs.finish(claim, "exec-1", "completed")  # terminal is terminal
    queued = jobs.create_job()
    assert jobs.cancel_queued(queued) and jobs.get(queued).state == "cancelled"
    assert not jobs.cancel_queued(job)
    assert count(registry, "corevo_job_terminal_total", state="failed") == 1
    assert count(registry, "corevo_job_terminal_total", state="cancelled") == 1


def test_local_fast_path_is_owned_at_once_and_counted(backend, registry):
    jobs = backend.store()
    claim = jobs.create_local(owner="A")
    assert claim.epoch == 1 and jobs.get(claim.job_id).owner == "A"
    assert jobs.candidates() == []
    queued = jobs.create_job()
    assert jobs.candidates() == [queued]
    assert count(registry, "corevo_job_dispatch_path_total", path="local") == 1
    assert count(registry, "corevo_job_dispatch_path_total", path="queued") == 1


def test_recover_uses_owner_liveness(backend):
    jobs = backend.store()
    a_job, b_job, c_job = jobs.create_job(), jobs.create_job(), jobs.create_job()
    jobs.claim(a_job, owner="gone")
    jobs.start(jobs.claim(b_job, owner="gone").claim)
    jobs.claim(c_job, owner="alive")
    verdict = {"gone": False, "alive": True}
    rec = jobs.recover(alive=verdict.get)
    assert (rec.reclaimed, rec.lost) == (1, 1)
    assert jobs.get(a_job).owner is None and jobs.get(b_job).state == "lost"
    assert jobs.get(c_job).owner == "alive"


def test_sql_is_shared_and_translated_not_rewritten():
    assert to_pyformat("a = :job AND b = :owner") == "a = %(job)s AND b = %(owner)s"
    assert to_pyformat("x::text LIKE '5%'") == "x::text LIKE '5%%'"
    with pytest.raises(ConfigError):
        SqliteJobStore(":memory:", table="jobs; drop table x")


def test_postgres_store_refuses_a_connection_outside_autocommit(pg_dsn):
    import psycopg

    with psycopg.connect(pg_dsn) as conn, pytest.raises(ConfigError, match="autocommit"):
        PostgresJobStore(conn)


def test_postgres_store_takes_the_callers_pool_and_leaves_it_open(pg_dsn, registry):
    from psycopg_pool import ConnectionPool

    from corevo_obs.core.errors import BackendUnavailable

    table = f"jobs_{uuid.uuid4().hex[:10]}"
    with ConnectionPool(pg_dsn, kwargs={"autocommit": True}, min_size=1, open=True) as pool:
        jobs = PostgresJobStore(pool, table=table, registry=registry)
        assert jobs.claim(jobs.create_job()).won
        jobs.db.run(f"DROP TABLE {table}", {})
        jobs.close()
        assert not pool.closed                    # the caller's pool stays the caller's
    with ConnectionPool(pg_dsn, min_size=1, open=True) as pool, pytest.raises(
            ConfigError, match="autocommit"):
        PostgresJobStore(pool, table=table, registry=registry)
    import psycopg

    conn = psycopg.connect(pg_dsn, autocommit=True)
    jobs = PostgresJobStore(conn, table=table, registry=registry, worker="w0")
    conn.close()                                  # a single connection cannot be replaced
    with pytest.raises(BackendUnavailable, match="pass a DSN or a pool"):
        jobs.claim("x")
    assert count(registry, "corevo_instrumentation_errors_total", component="claims-db") == 1
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(f"DROP TABLE {table}")
