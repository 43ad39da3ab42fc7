"""Counters exist at 0 from their owner's start (``catalog.ZEROED``): each real owner is
built on a fresh registry, and every label set it can produce is exposed before any
event, so an alert's ``increase()`` sees the first one. Also the stuck-job gauge and the
master's kill report with the stall's true age (a failed finish: test_claims_outage.py)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from corevo_obs.claims.sqlite import SqliteJobStore
from corevo_obs.core.catalog import CATALOG, NOT_ZEROED, ZEROED, zero_label_sets
from corevo_obs.core.errors import CatalogError
from corevo_obs.integrations.asgi import StagesMiddleware
from corevo_obs.integrations.frozen_kills import KillCounter, report_kill
from corevo_obs.leases.breaker import CircuitBreaker
from corevo_obs.leases.sqlite_store import SqliteLeaseStore
from corevo_obs.loop.watchdog import StallWatchdog
from corevo_obs.mpdir.stalls import OngoingStall, write_ongoing
from corevo_obs.observer import MetricsObserver
from corevo_obs.offload import OffloadAdapter


def _at_zero(registry: CollectorRegistry, owner: str, **given: str) -> list[str]:
    """The label sets of ``owner`` that are missing from ``registry`` or not 0."""
    wrong = []
    for s, labels in zero_label_sets(owner, **given):
        value = registry.get_sample_value(s.name, labels)
        if value != 0.0:
            wrong.append(f"{s.name}{labels} = {value}")
    return wrong


def test_every_counter_is_zeroed_by_an_owner_or_says_why_not() -> None:
    counters = {n for n, s in CATALOG.items() if s.kind == "counter"}
    owned = {n for names in ZEROED.values() for n in names}
    assert counters - owned - NOT_ZEROED == set()
    assert owned <= counters


def test_an_owner_must_name_its_open_labels() -> None:
    with pytest.raises(CatalogError, match="give its 'quota'"):
        list(zero_label_sets("lease-store", worker="w0"))
    with pytest.raises(CatalogError, match="no counters"):
        list(zero_label_sets("nobody"))


def test_lease_store_exposes_its_counters_at_zero(tmp_path: Path) -> None:
    reg = CollectorRegistry()
    SqliteLeaseStore("llm", tmp_path / "l.db", limit=2, worker="w0", registry=reg).close()
    assert _at_zero(reg, "lease-store", worker="w0", quota="llm") == []
    assert reg.get_sample_value("corevo_lease_heartbeat_total",
                                {"worker": "w0", "quota": "llm", "outcome": "lost"}) == 0.0


def test_redis_store_with_replicas_also_zeroes_its_replica_waits() -> None:
    pytest.importorskip("redis")
    from corevo_obs.leases.redis_store import RedisLeaseStore

    reg = CollectorRegistry()  # no connection is made to build a store
    store = RedisLeaseStore("llm", "redis://127.0.0.1:1/0", limit=2, replicas=1,
                            wait_timeout=0.1, worker="w0", registry=reg)
    store.close()
    assert _at_zero(reg, "lease-store", worker="w0", quota="llm") == []
    assert _at_zero(reg, "lease-replicas", worker="w0", quota="llm") == []


def test_claims_store_exposes_its_counters_at_zero(tmp_path: Path) -> None:
    reg = CollectorRegistry()
    SqliteJobStore(tmp_path / "j.db", worker="w1", registry=reg).close()
    assert _at_zero(reg, "claims-store", worker="w1") == []
    assert reg.get_sample_value("corevo_instrumentation_errors_total",
                                {"worker": "w1", "component": "claims-db"}) == 0.0


def test_components_that_bind_at_start_expose_their_counters_at_zero() -> None:
    reg = CollectorRegistry()
    MetricsObserver(worker="w2", registry=reg)
    CircuitBreaker("lease:llm", worker="w2", registry=reg)
    OffloadAdapter(name="sdk", max_in_flight=2, worker="w2", registry=reg)
    StallWatchdog(worker="w2", registry=reg)
    assert _at_zero(reg, "observer", worker="w2") == []
    assert _at_zero(reg, "breaker", worker="w2", backend="lease:llm") == []
    assert _at_zero(reg, "offload", worker="w2", adapter="sdk") == []
    assert _at_zero(reg, "watchdog", worker="w2") == []
    async def app(scope: object, receive: object, send: object) -> None:
        return None

    mw = StagesMiddleware(app, worker="w2", registry=reg)
    assert _at_zero(reg, "stages-middleware", worker="w2") != []  # bound at its first use
    assert mw.recorder is not None
    assert _at_zero(reg, "stages-middleware", worker="w2") == []


def test_kill_counter_is_zero_per_slot_and_the_kill_names_the_stall_at_its_true_age(
        tmp_path: Path) -> None:
    counter = KillCounter()
    counter.zero("w0")
    counter.zero("w1")
    reg = CollectorRegistry()
    reg.register(counter)
    assert _at_zero(reg, "gunicorn-master", worker="w1") == []
    # the worker's last report (in the shared directory, as a frozen worker leaves it)
    # said 8.3 s, 7.7 s before the kill: the stall is 16 s old when the master kills it
    write_ongoing(tmp_path, {"worker": "w1", "duration_seconds": 8.3, "ended_at": 1000.0,
                             "cause": "blocking", "project_frames": [],
                             "culprit": {"file": "app/export.py", "line": 42,
                                         "function": "render"}})
    lines: list[str] = []

    class Log:
        def error(self, fmt: str, text: str) -> None:
            lines.append(fmt % text)

    text = report_kill(Log(), tmp_path, "w1", os.getpid(), 20, counter, now=1007.7)
    assert lines == [text]
    assert "stalled 16.0s at app/export.py:42:render [blocking]" in text, text
    assert reg.get_sample_value("corevo_worker_killed_total",
                                {"worker": "w1", "reason": "timeout"}) == 1.0
    assert reg.get_sample_value("corevo_worker_killed_stall_seconds", {
        "worker": "w1", "cause": "blocking", "where": "app/export.py:42:render"}) == \
        pytest.approx(16.0)
    # a later kill without a stall report does not show the older kill's line
    report_kill(Log(), tmp_path, "w1", os.getpid() + 1, 20, counter, now=2000.0)
    assert reg.get_sample_value("corevo_worker_killed_total",
                                {"worker": "w1", "reason": "timeout"}) == 2.0
    assert "corevo_worker_killed_stall_seconds{" not in generate_latest(reg).decode()
    # a hostile cause from the shared directory stays a bounded label value
    counter.stalled("w0", OngoingStall(1, "w0", 1.0, 1.0, "x" * 400, "a.py:1:f"))
    assert 'cause="unknown"' in generate_latest(reg).decode()


def test_recovery_reads_the_age_of_the_oldest_running_job(tmp_path: Path) -> None:
    reg = CollectorRegistry()
    now = [1000.0]
    jobs = SqliteJobStore(tmp_path / "j.db", worker="w4", registry=reg,
                          clock=lambda: now[0])
    labels = {"worker": "w4", "table": "corevo_jobs"}
    jobs.recover()
    assert reg.get_sample_value("corevo_job_running_oldest_seconds", labels) == 0.0
    claim = jobs.claim(jobs.create_job()).claim
    assert claim is not None and jobs.start(claim, "e1").started
    now[0] = 1600.0
    jobs.recover()  # the owner is this live process: the job stays running
    assert reg.get_sample_value("corevo_job_running_oldest_seconds", labels) == 600.0
    jobs.finish(claim, "e1", "completed")
    jobs.recover()
    assert reg.get_sample_value("corevo_job_running_oldest_seconds", labels) == 0.0
    jobs.close()


def test_async_store_reads_it_too(tmp_path: Path) -> None:
    from corevo_obs.claims.sqlite import AsyncSqliteJobStore

    async def main() -> float | None:
        reg = CollectorRegistry()
        jobs = AsyncSqliteJobStore(tmp_path / "j.db", worker="w5", registry=reg,
                                   clock=lambda: time.time() - 5)
        claim = (await jobs.claim(await jobs.create_job())).claim
        assert claim is not None and (await jobs.start(claim, "e1")).started
        jobs.clock = time.time
        await jobs.recover()
        await jobs.aclose()
        return reg.get_sample_value("corevo_job_running_oldest_seconds",
                                    {"worker": "w5", "table": "corevo_jobs"})

    age = asyncio.run(main())
    assert age is not None and 4.0 < age < 60.0
