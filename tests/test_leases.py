"""Lease semantics, identical on a real redis-server and a real SQLite file."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time

import pytest

from corevo_obs.guard import reset_for_tests
from corevo_obs.leases import (
    AsyncLease,
    AsyncRedisLeaseStore,
    AsyncSqliteLeaseStore,
    LeaseAuditor,
    RedisLeaseStore,
    SqliteLeaseStore,
)
from tests.conftest import free_port


class Clock:
    """An injectable wall clock: tests move time instead of sleeping."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


def sample(registry, name, **labels):
    return registry.get_sample_value(name, {"worker": "w0", "quota": "q", **labels}) or 0.0


@pytest.fixture(params=["redis", "sqlite"])
def make_store(request, registry, tmp_path):
    made = []

    def make(**opts):
        opts = {"limit": 2, "timeout": 1.0, "worker": "w0", "registry": registry, **opts}
        if request.param == "redis":
            url = request.getfixturevalue("redis_url")
            store = RedisLeaseStore("q", url, **opts)
        else:
            store = SqliteLeaseStore("q", tmp_path / "leases.db", **opts)
        made.append(store)
        return store

    yield make
    for s in made:
        s.close()


@pytest.fixture(params=["redis", "sqlite"])
def make_async_store(request, registry, tmp_path):
    def make(**opts):
        opts = {"limit": 2, "timeout": 1.0, "worker": "w0", "registry": registry, **opts}
        if request.param == "redis":
            return AsyncRedisLeaseStore("q", request.getfixturevalue("redis_url"), **opts)
        return AsyncSqliteLeaseStore("q", tmp_path / "leases.db", **opts)

    return make


def test_grants_up_to_the_limit_then_rejects(make_store, registry):
    store = make_store(limit=2)
    a, b, c = store.acquire(), store.acquire(), store.acquire()
    assert a is not None and b is not None and c is None
    assert a.holder != b.holder
    assert len(store.holders()) == 2
    assert sample(registry, "corevo_lease_acquire_total", outcome="granted") == 2
    assert sample(registry, "corevo_lease_acquire_total", outcome="rejected") == 1
    assert registry.get_sample_value("corevo_lease_held", {"quota": "q"}) == 2
    assert registry.get_sample_value("corevo_lease_limit", {"quota": "q"}) == 2
    assert sample(registry, "corevo_lease_acquire_seconds_count") == 3


def test_two_processes_share_one_quota(make_store, registry):
    """Two store objects (two connections) see the same slots."""
    first, second = make_store(limit=1), make_store(limit=1)
    assert first.acquire() is not None
    assert second.acquire() is None


def test_retry_with_the_same_holder_never_takes_a_second_slot(make_store):
    store = make_store(limit=1)
    lease = store.acquire()
    assert lease is not None
    again = store.acquire(lease.holder)  # full quota, but this holder already holds
    assert again is not None and again.holder == lease.holder
    assert len(store.holders()) == 1


def test_ghosts_are_reaped_by_the_next_acquire(make_store, registry):
    clock = Clock()
    store = make_store(limit=2, timeout=1.0, clock=clock)
    assert store.acquire() and store.acquire()   # two holders that will never release
    assert store.acquire() is None
    clock.now += 0.99                            # within the timeout: still held
    assert store.acquire() is None
    assert sample(registry, "corevo_lease_reaped_total") == 0
    clock.now += 0.02
    assert store.acquire() is not None           # reaped both, took one
    assert sample(registry, "corevo_lease_reaped_total") == 2
    assert registry.get_sample_value("corevo_lease_held", {"quota": "q"}) == 1


def test_double_release_is_counted_as_noop(make_store, registry):
    store = make_store()
    lease = store.acquire()
    assert lease is not None
    assert lease.release() is True
    assert lease.release() is False
    assert sample(registry, "corevo_lease_release_total", outcome="released") == 1
    assert sample(registry, "corevo_lease_release_total", outcome="noop") == 1
    assert sample(registry, "corevo_lease_hold_seconds_count") == 1  # only the real release


def test_heartbeat_keeps_a_slot_and_after_reaping_is_counted_lost(make_store, registry):
    clock = Clock()
    store = make_store(limit=1, timeout=1.0, clock=clock)
    lease = store.acquire()
    assert lease is not None
    for _ in range(5):                           # 2.5 s of heartbeats every 0.5 s
        clock.now += 0.5
        assert lease.heartbeat() is True
    assert store.acquire() is None               # never judged dead
    clock.now += 1.5                             # a stall longer than the timeout
    assert store.acquire() is not None           # another holder reaps it and takes the slot
    assert lease.heartbeat() is False            # the stalled holder learns it was reaped
    assert lease.lost
    assert len(store.holders()) == 1             # and did not sneak back past the limit
    assert sample(registry, "corevo_lease_heartbeat_total", outcome="renewed") == 5
    assert sample(registry, "corevo_lease_heartbeat_total", outcome="lost") == 1
    assert lease.release() is False
    assert sample(registry, "corevo_lease_release_total", outcome="noop") == 1


def test_context_manager_releases(make_store):
    store = make_store(limit=1)
    with store.acquire() as lease:
        assert lease is not None
        assert store.acquire() is None
    assert store.acquire() is not None


def _dead_redis_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there


def test_redis_down_fails_closed_counted_and_logged_once(registry, caplog):
    reset_for_tests()
    store = RedisLeaseStore("q", _dead_redis_url(), limit=2, worker="w0", registry=registry)
    with caplog.at_level(logging.DEBUG, logger="corevo_obs"):
        assert store.acquire() is None
        assert store.acquire() is None
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "lease-acquire" in warnings[0].getMessage()
    assert sample(registry, "corevo_lease_acquire_total", outcome="error") == 2
    assert registry.get_sample_value(
        "corevo_instrumentation_errors_total", {"worker": "w0", "component": "lease-acquire"}
    ) == 2
    assert store.heartbeat("someone") is False   # cannot prove it holds: closed
    assert store.release("someone") is False
    assert sample(registry, "corevo_lease_heartbeat_total", outcome="error") == 1
    assert sample(registry, "corevo_lease_release_total", outcome="error") == 1


def test_redis_down_fail_open_grants_a_degraded_lease(registry):
    store = RedisLeaseStore("q", _dead_redis_url(), limit=1, worker="w0", registry=registry,
                            fail_open=True)
    lease = store.acquire()
    assert lease is not None and lease.degraded
    assert lease.heartbeat() is True and lease.release() is False
    assert sample(registry, "corevo_lease_acquire_total", outcome="error") == 1


def test_async_store_semantics_and_keep_alive(make_async_store, registry):
    async def main() -> None:
        store = make_async_store(limit=1, timeout=0.6)
        lease = await store.acquire()
        assert isinstance(lease, AsyncLease)
        assert await store.acquire() is None
        lost: list[AsyncLease] = []
        lease.keep_alive(0.1, lost.append)
        await asyncio.sleep(0.9)                 # longer than the timeout: heartbeats kept it
        assert await store.acquire() is None and not lost
        assert await lease.release() is True
        assert await lease.release() is False

        victim = await store.acquire()
        assert victim is not None
        victim.keep_alive(0.3, lost.append)
        store.clock = lambda: time.time() + 100   # time jumps past the victim's expiry
        thief = await store.acquire()
        assert thief is not None                 # reaped the victim
        await asyncio.sleep(0.5)
        assert lost == [victim] and victim.lost
        async with thief:
            pass
        assert await store.holders() == []
        await store.close()

    asyncio.run(main())
    assert sample(registry, "corevo_lease_heartbeat_total", outcome="lost") == 1
    assert sample(registry, "corevo_lease_heartbeat_total", outcome="renewed") >= 5
    assert sample(registry, "corevo_lease_reaped_total") == 1
    assert sample(registry, "corevo_lease_release_total", outcome="noop") == 1


def test_auditor_names_holders_whose_process_is_gone(make_store, registry):
    store = make_store(limit=5, timeout=30)
    live = store.acquire()
    assert live is not None
    # A real process takes a slot and exits without releasing: a ghost with a dead pid.
    code = (
        "import sys; from corevo_obs.leases import SqliteLeaseStore, RedisLeaseStore;"
        "cls = RedisLeaseStore if sys.argv[1].startswith('redis') else SqliteLeaseStore;"
        "s = cls('q', sys.argv[1], limit=5, timeout=30, worker='w9');"
        "print(s.acquire().holder)"
    )
    target = getattr(store, "key", None) and store.client.connection_pool.connection_kwargs
    where = (f"redis://127.0.0.1:{target['port']}/0" if target else store._rows.path)
    ghost = subprocess.run([sys.executable, "-c", code, where], capture_output=True, text=True,
                           check=True).stdout.strip()
    foreign = "not-one-of-ours"
    assert store.acquire(foreign) is not None
    report = LeaseAuditor(store).audit()
    assert report.held == 3
    assert report.orphaned == (ghost,)
    assert report.unknown == (foreign,)
    assert report.expired == ()
    assert 0 <= report.oldest_age < 30
    assert registry.get_sample_value("corevo_lease_orphaned_holders", {"quota": "q"}) == 1


def test_observer_fast_path_records_what_prometheus_would(registry):
    """The observer's pre-bound fast path writes the very samples the public API writes."""
    from prometheus_client import CollectorRegistry

    from corevo_obs.metrics import child
    from corevo_obs.observer import MetricsObserver

    reference = CollectorRegistry()
    obs = MetricsObserver(worker="w0", registry=registry)
    values = [0.0, 0.0005, 0.0007, 0.001, 0.3, 1.0, 7.5, 1e9]   # on bounds, between, +Inf
    for v in values:
        obs.lease_acquired("q", "granted", reaped=2, held=1, limit=3, seconds=v)
        obs.lease_released("q", "noop", held_seconds=v)
        child("corevo_lease_acquire_seconds", reference, worker="w0", quota="q").observe(v)
        child("corevo_lease_hold_seconds", reference, worker="w0", quota="q").observe(v)

    def samples(reg, name):
        return sorted((s.name, tuple(sorted(s.labels.items())), s.value)
                      for m in reg.collect() if m.name == name for s in m.samples
                      if not s.name.endswith("_created"))

    for name in ("corevo_lease_acquire_seconds", "corevo_lease_hold_seconds"):
        assert samples(registry, name) == samples(reference, name)
    assert sample(registry, "corevo_lease_acquire_total", outcome="granted") == len(values)
    assert sample(registry, "corevo_lease_reaped_total") == 2 * len(values)
    assert sample(registry, "corevo_lease_release_total", outcome="noop") == len(values)
