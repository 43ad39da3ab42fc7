"""Lease semantics, identical on a real redis-server and a real SQLite file."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time

import pytest

from corevo_obs.core.guard import reset_for_tests
from corevo_obs.leases import AsyncLease, LeaseAuditor, RedisLeaseStore
from tests.conftest import free_port
from tests.helpers.lease_kit import store_for


def sample(registry, name, **labels):
    return registry.get_sample_value(name, {"worker": "w0", "quota": "q", **labels}) or 0.0


@pytest.fixture(params=["redis", "sqlite"])
def make_store(request, registry, tmp_path):
    made = []

    def make(**opts):
        opts = {"limit": 2, "timeout": 1.0, "worker": "w0", "registry": registry, **opts}
        where = (request.getfixturevalue("redis_url") if request.param == "redis"
                 else tmp_path / "leases.db")
        store = store_for(where, "q", fresh=True, **opts)  # a flushed server: no fence
        made.append(store)
        return store

    yield make
    for s in made:
        s.close()


@pytest.fixture(params=["redis", "sqlite"])
def make_async_store(request, registry, tmp_path):
    async def make(**opts):
        opts = {"limit": 2, "timeout": 1.0, "worker": "w0", "registry": registry, **opts}
        where = (request.getfixturevalue("redis_url") if request.param == "redis"
                 else tmp_path / "leases.db")
        store = store_for(where, "q", asynchronous=True, **opts)
        await store.declare_fresh()
        return store

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


def test_acquire_and_hold_take_one_set_of_keywords(make_store, registry):
    """One lease-holding API: ``acquire()`` and ``hold()`` take the same keyword-only
    ``wait=``, ``holder=``, ``poll=``; a waiting ``acquire`` retries under one holder id
    and answers None when no slot came, ``hold`` raises ``LeaseRejected``."""
    import inspect

    from corevo_obs.core.errors import LeaseRejected

    store = make_store(limit=1)
    for method in (store.acquire, store.hold):
        params = inspect.signature(method).parameters
        assert list(params) == ["wait", "holder", "poll"]
        assert all(p.kind is p.KEYWORD_ONLY for p in params.values())
    with pytest.raises(TypeError):
        store.acquire("h1")  # type: ignore[misc]  # the holder is said by name
    first = store.acquire(holder="h1")
    assert first is not None and first.holder == "h1"
    t0 = time.monotonic()
    assert store.acquire(wait=0.3, poll=0.05, holder="h2") is None
    waited = time.monotonic() - t0
    assert 0.2 <= waited < 2.0, waited  # it retried for the wait, then gave up
    assert [h for h, _ in store.holders()] == ["h1"]  # no retry took a second slot
    with pytest.raises(LeaseRejected):
        with store.hold(wait=0.1, poll=0.05):
            pass
    seen = store.track()  # what aiomonitor's `leases` command lists
    first.release()
    with store.hold(holder="h3") as lease:
        assert dict(seen) == {"h3": lease}
    assert dict(seen) == {}  # released: no longer listed
    assert not hasattr(store, "acquire_within") and not hasattr(store, "run")


def test_every_lease_source_takes_the_same_keywords_in_the_same_order() -> None:
    """Plain, sharded and buffered, blocking and asyncio: ``hold`` and ``acquire`` take
    ``wait, holder, poll`` (after ``key`` where there are shards), keyword-only."""
    import inspect

    from corevo_obs import leases

    sources = {"AsyncLeaseStore": [], "LeaseStore": [], "ShardedLeaseStore": ["key"],
               "AsyncShardedLeaseStore": ["key"], "LeaseBuffer": ["key"],
               "AsyncLeaseBuffer": ["key"]}
    wrong = []
    for name, first in sources.items():
        for method in ("acquire", "hold"):
            params = inspect.signature(getattr(getattr(leases, name), method)).parameters
            names = [p for p in params if p != "self"]
            kinds = {params[p].kind for p in names}
            if names != [*first, "wait", "holder", "poll"] or kinds != {
                    inspect.Parameter.KEYWORD_ONLY}:
                wrong.append(f"{name}.{method}: {names}")
    assert not wrong, wrong


def test_two_processes_share_one_quota(make_store, registry):
    """Two store objects (two connections) see the same slots."""
    first, second = make_store(limit=1), make_store(limit=1)
    assert first.acquire() is not None
    assert second.acquire() is None


def test_retry_with_the_same_holder_never_takes_a_second_slot(make_store):
    store = make_store(limit=1)
    lease = store.acquire()
    assert lease is not None
    again = store.acquire(holder=lease.holder)  # full quota, but this holder already holds
    assert again is not None and again.holder == lease.holder
    assert len(store.holders()) == 1


def test_ghosts_are_reaped_by_the_next_acquire(make_store, registry):
    store = make_store(limit=2, timeout=1.0)
    assert store.acquire() and store.acquire()   # two holders that will never release
    beats = [at for _, at in store.holders()]
    # The backend's clock decides (no client clock= is consulted), so the test polls
    # instead of sleeping a fixed time and checks the grant against that clock.
    deadline = time.monotonic() + 60
    while (lease := store.acquire()) is None:    # still held: nothing reaped yet
        assert sample(registry, "corevo_lease_reaped_total") == 0
        assert time.monotonic() < deadline, "the ghosts were never reaped"
        time.sleep(0.05)
    granted_at = dict(store.holders())[lease.holder]  # stamped by the backend
    assert granted_at - min(beats) >= 1.0        # not one before the timeout
    # the grant reaps exactly the ghosts past their timeout at that instant: both when the
    # two were stamped within a poll of each other, the first alone when a busy box let
    # more time pass between them (then the second still holds its slot)
    expired = sum(round(granted_at - 1.0 - at, 6) > 0 for at in beats)
    assert expired >= 1
    assert sample(registry, "corevo_lease_reaped_total") == expired
    assert len(store.holders()) == 1 + (2 - expired)
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
    store = make_store(limit=1, timeout=1.0)
    lease = store.acquire()
    assert lease is not None
    for _ in range(5):                           # 1.5 s of heartbeats every 0.3 s
        time.sleep(0.3)
        assert lease.heartbeat() is True
        assert lease.valid()
    assert store.acquire() is None               # never judged dead
    time.sleep(1.1)                              # a stall longer than the timeout
    assert not lease.valid() and lease.lost_reason == "unconfirmed"   # it knows, locally
    assert store.acquire() is not None           # another holder reaps it and takes the slot
    assert lease.heartbeat() is False            # lost is sticky: no renewal is even tried
    assert lease.lost and lease.lost_event.is_set()
    assert len(store.holders()) == 1             # and did not sneak back past the limit
    assert sample(registry, "corevo_lease_heartbeat_total", outcome="renewed") == 5
    assert lease.release() is False
    assert sample(registry, "corevo_lease_release_total", outcome="noop") == 1


def test_renewal_of_an_expired_member_is_lost_even_before_a_reap(make_store, registry):
    store = make_store(limit=1, timeout=1.0)
    lease = store.acquire()
    assert lease is not None
    time.sleep(1.1)
    assert store.heartbeat(lease.holder) is False   # the store-level call: no local check
    assert store.holders() == []                     # and the expired member is gone
    assert sample(registry, "corevo_lease_heartbeat_total", outcome="lost") == 1


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
        store = await make_async_store(limit=1, timeout=0.6, heartbeat_interval=0.1)
        lease = await store.acquire()
        assert isinstance(lease, AsyncLease)
        assert await store.acquire() is None
        lost: list[AsyncLease] = []
        lease.keep_alive(0.1, lost.append)
        await asyncio.sleep(0.9)                 # longer than the timeout: heartbeats kept it
        assert await store.acquire() is None and not lost and lease.valid()
        assert await lease.release() is True
        assert await lease.release() is False

        victim = await store.acquire()
        assert victim is not None
        victim.keep_alive(0.1, lost.append)
        assert await store._remove(victim.holder)   # judged dead behind its back
        await asyncio.sleep(0.3)
        assert lost == [victim] and victim.lost and victim.lost_reason == "lost"
        thief = await store.acquire()
        assert thief is not None
        async with thief:
            pass
        assert await store.holders() == []
        await store.aclose()

    asyncio.run(main())
    assert sample(registry, "corevo_lease_heartbeat_total", outcome="lost") == 1
    assert sample(registry, "corevo_lease_heartbeat_total", outcome="renewed") >= 5
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
    target = getattr(store, "keys", None) and store.client.connection_pool.connection_kwargs
    where = (f"redis://127.0.0.1:{target['port']}/0" if target else store._rows.path)
    ghost = subprocess.run([sys.executable, "-c", code, where], capture_output=True, text=True,
                           check=True).stdout.strip()
    foreign = "not-one-of-ours"
    assert store.acquire(holder=foreign) is not None
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

    from corevo_obs.core.metrics import child
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


# --- backend clock, validation, restart fence, tokens, loss-aware holders ----------------

@pytest.mark.parametrize("bad, words", [
    ({"limit": 0}, "limit must be an int >= 1"),
    ({"limit": True}, "limit must be an int >= 1"),
    ({"limit": 2.5}, "limit must be an int >= 1"),
    ({"timeout": float("nan")}, "timeout must be finite"),
    ({"timeout": float("inf")}, "timeout must be finite"),
    ({"timeout": 0}, "timeout must be finite and > 0"),
    ({"heartbeat_interval": -1}, "heartbeat_interval must be finite"),
])
def test_construction_rejects_bad_numbers(tmp_path, bad, words):
    from corevo_obs.core.errors import ConfigError
    from corevo_obs.leases import SqliteLeaseStore

    with pytest.raises(ConfigError, match=words):
        SqliteLeaseStore("q", tmp_path / "l.db", **{"limit": 2, "timeout": 30, **bad})


def test_a_timeout_the_store_waits_could_exceed_is_refused_naming_the_numbers(tmp_path):
    from corevo_obs.core.errors import ConfigError
    from corevo_obs.leases import SqliteLeaseStore

    with pytest.raises(ConfigError) as sqlite_err:
        SqliteLeaseStore("q", tmp_path / "l.db", limit=2, timeout=1.0)  # busy timeout 5 s
    text = str(sqlite_err.value)
    assert "timeout 1s" in text and "SQLite busy timeout 5s" in text
    assert "heartbeat interval 0.333s" in text and "= 5.43s" in text
    with pytest.raises(ConfigError, match=r"Redis connect \+ socket timeout 3s"):
        RedisLeaseStore("q", _dead_redis_url(), limit=2, timeout=3.0)
    with pytest.raises(ConfigError, match="heartbeat interval 2.5s"):
        SqliteLeaseStore("q", tmp_path / "l.db", limit=2, timeout=8.0, heartbeat_interval=2.5)
    SqliteLeaseStore("q", tmp_path / "l.db", limit=2, timeout=9.0).close()   # 3 + 5 + 0.9


def test_a_given_redis_client_is_checked_by_its_own_timeouts(redis_url):
    import redis

    from corevo_obs.core.errors import ConfigError

    slow = redis.Redis.from_url(redis_url, socket_timeout=5, socket_connect_timeout=5)
    with pytest.raises(ConfigError, match="socket timeout 10s"):
        RedisLeaseStore("q", slow, limit=1, timeout=10)
    forever = redis.Redis.from_url(redis_url, socket_timeout=None)
    with pytest.raises(ConfigError, match="no socket_timeout"):
        RedisLeaseStore("q", forever, limit=1, timeout=10)
    ok = RedisLeaseStore("q", slow, limit=1, timeout=30)
    assert ok.store_wait()[0] == 10
    slow.close()
    forever.close()


def test_a_client_clock_10s_ahead_changes_nothing(make_store, registry):
    """Times come from the backend: a skewed client neither reaps a live lease nor writes
    one that others see as expired."""
    honest = make_store(limit=1, timeout=1.0)
    skewed = make_store(limit=1, timeout=1.0, clock=lambda: time.time() + 10)
    lease = honest.acquire()
    assert lease is not None
    for _ in range(4):
        assert skewed.acquire() is None          # would reap the honest lease if it trusted
        time.sleep(0.25)                         # its own clock (10 s ahead of every beat)
        assert lease.heartbeat() is True
    assert sample(registry, "corevo_lease_reaped_total") == 0
    lease.release()
    mine = skewed.acquire()
    assert mine is not None
    time.sleep(0.3)
    assert honest.acquire() is None              # the skewed holder's lease is not "old"
    assert abs(skewed.holders()[0][1] - time.time()) < 0.5   # stamped by the backend


def test_redis_restart_fence_refuses_grants_for_one_timeout(redis_url, registry):
    """An empty keyspace (first use, restart without persistence, FLUSHALL, failover
    that lost the marker) is fenced: no grant until a timeout has passed."""
    store = store_for(redis_url, "q", limit=2, timeout=1.0, worker="w0", registry=registry)
    t0 = time.monotonic()
    assert store.acquire() is None               # the marker was missing: fence starts
    assert sample(registry, "corevo_lease_acquire_total", outcome="fenced") == 1
    assert sample(registry, "corevo_lease_acquire_total", outcome="rejected") == 0
    lease = None
    while lease is None:
        lease = store.acquire()
        time.sleep(0.02)
    fenced_for = time.monotonic() - t0
    assert 0.95 <= fenced_for < 1.5, fenced_for
    first = lease.token
    store.client.flushall()                      # the server forgets everything
    assert lease.heartbeat() is False and lease.lost_reason == "lost"
    assert store.acquire() is None               # fenced again
    time.sleep(1.05)
    again = store.acquire()
    assert again is not None and again.token > first   # tokens grow across the loss
    store.close()


def test_tokens_grow_with_every_grant(make_store):
    store = make_store(limit=3)
    leases = [store.acquire() for _ in range(3)]
    tokens = [lease.token for lease in leases if lease is not None]
    assert len(tokens) == 3 and tokens == sorted(set(tokens))
    leases[0].release()
    nxt = store.acquire()
    assert nxt is not None and nxt.token > tokens[-1]
    retry = store.acquire(holder=nxt.holder)            # a retry refreshes and gets a newer token
    assert retry is not None and retry.token > nxt.token


HOLD_LOCK = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
db.execute("ROLLBACK")
print(repr(time.time()), flush=True)
"""


def test_sqlite_stamps_the_time_after_the_lock_wait(tmp_path, registry):
    """A call that queued behind another writer is stamped when it ran, not before."""
    path = tmp_path / "leases.db"
    store = store_for(path, "q", limit=1, timeout=4.0, busy_timeout=2.0,
                      heartbeat_interval=0.5, registry=registry)
    writer = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(path), "1.0"],
                              stdout=subprocess.PIPE, text=True)
    assert writer.stdout is not None and writer.stdout.readline().strip() == "locked"
    lease = store.acquire()                      # waits ~1 s for the lock
    unlocked = float(writer.stdout.readline())
    assert writer.wait(timeout=30) == 0
    assert lease is not None
    (_, stamp), = store.holders()
    assert stamp >= unlocked - 0.01, (stamp, unlocked)
    store.close()


def test_async_hold_cancels_the_body_when_the_lease_is_lost(make_async_store, registry):
    from corevo_obs.core.errors import LeaseLost

    async def main() -> None:
        store = await make_async_store(limit=1, timeout=1.0, heartbeat_interval=0.1)
        stopped: list[float] = []

        async def body(lease: AsyncLease) -> None:
            try:
                await store._remove(lease.holder)      # reaped behind its back
                await asyncio.sleep(5)
            finally:
                stopped.append(time.monotonic())

        t0 = time.monotonic()
        with pytest.raises(LeaseLost) as lost:
            async with store.hold() as lease:
                await body(lease)
        assert lost.value.reason == "lost" and stopped and stopped[0] - t0 < 0.6
        me = asyncio.current_task()
        assert me is not None and me.cancelling() == 0   # our cancel was taken back

        # An outer cancel still wins: it is not turned into LeaseLost.
        async def outer() -> None:
            async with store.hold():
                await asyncio.sleep(5)

        task = asyncio.create_task(outer())
        await asyncio.sleep(0.2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        async with store.hold():
            assert await asyncio.sleep(0.3, "ok") == "ok"          # kept alive meanwhile
        assert await store.holders() == []                         # released each time
        await store.aclose()

    asyncio.run(main())


def test_async_hold_stops_the_body_when_renewal_cannot_be_confirmed(tmp_path, registry):
    """Renewals block on a write lock held by another process: the holder stops at its
    own deadline (confirmed + timeout - margin), before the backend could reap it."""
    from corevo_obs.core.errors import LeaseLost

    path = tmp_path / "leases.db"

    async def main() -> tuple[float, float]:
        store = store_for(path, "q", asynchronous=True, limit=1, timeout=1.0,
                          heartbeat_interval=0.2, registry=registry)
        with pytest.raises(LeaseLost) as lost:
            async with store.hold() as lease:
                granted = lease.confirmed_at
                writer = await asyncio.create_subprocess_exec(
                    sys.executable, "-c", HOLD_LOCK, str(path), "2.0",
                    stdout=asyncio.subprocess.PIPE)
                assert writer.stdout is not None
                assert (await writer.stdout.readline()).strip() == b"locked"
                try:
                    await asyncio.sleep(5)
                finally:
                    stopped = time.monotonic()
                    assert lease.lost_event.is_set() and not lease.valid()
                    confirmed = lease.confirmed_at  # the grant, or a renewal before the lock
        assert lost.value.reason == "unconfirmed"
        assert confirmed >= granted
        await writer.wait()
        await store.aclose()
        return stopped - confirmed

    held_for = asyncio.run(main())
    # stopped at the deadline (last confirmation + 1.0 - 0.1 margin), not before; how late
    # the cancel lands is the loop's scheduling (1.14 s at load 40), so the upper bound is
    # only "not at the sleep's end"
    assert 0.85 <= held_for < 4.0, held_for


def test_sync_hold_raises_at_exit_and_sets_the_event(make_store):
    from corevo_obs.core.errors import LeaseLost, LeaseRejected

    store = make_store(limit=1, timeout=1.0, heartbeat_interval=0.1)
    with store.hold() as lease:
        time.sleep(1.3)                            # the keeper thread renews meanwhile
        assert lease.valid()
        with pytest.raises(LeaseRejected, match="last: rejected"):
            store.hold(wait=0.3).__enter__()
    with pytest.raises(LeaseLost):
        with store.hold() as lease:
            store._remove(lease.holder)
            assert lease.lost_event.wait(2.0)      # the keeper saw it
            with pytest.raises(LeaseLost):
                lease.check()
    assert store.holders() == []


def test_holder_ids_follow_a_fork_without_reading_proc_when_minted() -> None:
    """A forked child mints ids naming its own pid and start time (the at-fork hook read
    them), so ``holder_alive`` judges the child's leases by the child."""
    import os

    from corevo_obs.leases.holder import HolderId, HolderIds, holder_alive

    ids = HolderIds("w0")
    parent = HolderId.parse(ids.new())
    assert parent is not None and parent.pid == os.getpid() and parent.start > 0
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: mint, report, leave without running the parent's teardown
        os.write(write, ids.new().encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as fh:
        minted = fh.read()
    os.waitpid(pid, 0)
    child = HolderId.parse(minted)
    assert child is not None and child.pid == pid and child.start >= parent.start
    assert child.worker == "w0" and child.seq != parent.seq
    assert holder_alive(minted) is False  # the child has exited: its leases are a ghost's
