"""The per-worker lease buffer on real servers: a private redis-server, a 3-primary Cluster.

Unit-level rules (bound, no double handout, idle return, recent demand, crowding, a lost
buffered lease) run on the session's redis-server, the sharded store on a plain client.
A SIGKILLed worker's buffered slots come back one lease timeout after its last renewal.
The storm: three holder processes (this file run as a script, ``holder`` mode), each
with a buffer of 2 on a sharded limit-6 quota of the Cluster, one SIGKILLed mid-run; each
hold writes its own grant → end-of-work interval (a hold id of its own: a buffered lease
keeps its holder id across holds), and the sweep over them must never exceed 6.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry

from tests.helpers.lease_kit import store_for
from tests.test_leases_cluster import cluster as cluster3  # noqa: F401 - a fixture

TIMING: dict[str, Any] = {"timeout": 2.0, "heartbeat_interval": 0.4, "margin": 0.3}
HERE = Path(__file__).resolve()


def _sample(registry: CollectorRegistry, name: str, quota: str, **labels: str) -> float:
    value = registry.get_sample_value(name, {"worker": "w0", "quota": quota, **labels})
    return 0.0 if value is None else value


def _evalsha(url: str) -> int:
    stats = redis.Redis.from_url(url).info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


def test_buffer_serves_kept_leases_without_a_round_trip_and_respects_its_bound(
        redis_url: str, registry: CollectorRegistry) -> None:
    from corevo_obs.core.errors import ConfigError
    from corevo_obs.leases.buffer import LeaseBuffer

    store = store_for(redis_url, "bq", fresh=True, limit=3, worker="w0", registry=registry,
                      **TIMING)
    with pytest.raises(ConfigError, match="size must be"):
        LeaseBuffer(store, size=0)
    with pytest.raises(ConfigError, match="below the lease timeout"):
        LeaseBuffer(store, size=1, idle=2.0)
    buf = LeaseBuffer(store, size=2, idle=1.5)
    leases = [buf.acquire() for _ in range(3)]
    assert all(lease is not None for lease in leases) and buf.acquire() is None
    a, b, c = leases
    assert a and b and c
    assert buf.release(a) and buf.release(b) and buf.release(c)
    assert buf.buffered == 2  # the bound: the third went back to Redis
    assert not buf.release(a)  # a second return of a kept lease changes nothing
    assert buf.buffered == 2
    assert sorted(h for h, _ in store.holders()) == sorted([a.holder, b.holder])
    before = _evalsha(redis_url)
    x, y = buf.acquire(), buf.acquire()
    assert _evalsha(redis_url) == before  # both served from the buffer: no script ran
    assert {x, y} == {a, b} and x is not y  # each to one holder only
    z = buf.acquire()  # the buffer is empty: the store grants the third slot
    assert z is not None and z not in (a, b) and _evalsha(redis_url) == before + 1
    assert buf.acquire() is None
    for lease in (x, y, z):
        assert lease is not None and buf.release(lease)
    assert buf.buffered == 2 and len(store.holders()) == 2
    assert _sample(registry, "corevo_lease_buffered", "bq") == 2
    assert _sample(registry, "corevo_lease_buffer_total", "bq", outcome="hit") == 2
    assert _sample(registry, "corevo_lease_buffer_total", "bq", outcome="kept") == 4
    assert _sample(registry, "corevo_lease_buffer_total", "bq", outcome="released") == 2
    # a lease released behind the buffer's back is never kept (its keep-alive stopped)
    w = buf.acquire()
    assert w is not None and w.release() and not buf.release(w)
    assert buf.buffered == 1
    buf.close()
    assert store.holders() == [] and buf.buffered == 0
    store.close()


def test_idle_leases_go_back_and_old_demand_keeps_nothing(
        redis_url: str, registry: CollectorRegistry) -> None:
    from corevo_obs.leases.buffer import LeaseBuffer

    store = store_for(redis_url, "bi", fresh=True, limit=4, worker="w0", registry=registry,
                      **TIMING)
    buf = LeaseBuffer(store, size=4, idle=0.3)
    held = [buf.acquire() for _ in range(3)]
    for lease in held:
        assert lease is not None and buf.release(lease)
    assert buf.buffered == 3 and len(store.holders()) == 3
    deadline = time.monotonic() + 2.0
    while store.holders() and time.monotonic() < deadline:
        time.sleep(0.02)
    idle_for = time.monotonic() - (deadline - 2.0)
    assert store.holders() == [] and buf.buffered == 0, "idle leases were kept"
    assert idle_for <= 0.3 + 0.15 + 0.2  # the idle bound plus half of it (the sweep)
    assert _sample(registry, "corevo_lease_buffer_total", "bi", outcome="idle") == 3
    # work longer than the idle bound with no admission meanwhile: released, not kept
    lease = buf.acquire()
    assert lease is not None
    time.sleep(0.35)
    assert buf.release(lease) and buf.buffered == 0 and store.holders() == []
    buf.close()
    store.close()


def test_a_crowded_sharded_quota_gets_its_leases_back(
        redis_url: str, registry: CollectorRegistry) -> None:
    from corevo_obs.leases.buffer import LeaseBuffer
    from corevo_obs.leases.sharded import ShardedLeaseStore

    client = redis.Redis.from_url(redis_url, socket_timeout=0.2, socket_connect_timeout=0.1)
    quota = ShardedLeaseStore("bc", client, limit=4, shards=2, worker="w0",
                              registry=registry, **TIMING)
    quota.declare_fresh()
    quota.rebalance()
    buf = LeaseBuffer(quota, size=2, idle=1.5)
    leases = [buf.acquire(key="t") for _ in range(4)]
    assert all(lease is not None for lease in leases) and buf.acquire(key="t") is None
    assert quota.crowded(2)
    first, second, *rest = leases
    assert first and second
    assert buf.release(first) and buf.buffered == 0  # seen full: the slot goes back
    assert buf.release(second) and buf.buffered == 0  # still < 2 seen free
    assert not quota.crowded(2)
    for lease in rest:
        assert lease is not None and buf.release(lease)
    assert buf.buffered == 2
    buf.close()
    quota.close()
    client.close()


def test_a_buffered_lease_found_lost_leaves_the_buffer(
        redis_url: str, registry: CollectorRegistry) -> None:
    from corevo_obs.leases.buffer import LeaseBuffer

    store = store_for(redis_url, "bl", fresh=True, limit=2, worker="w0", registry=registry,
                      **TIMING)
    buf = LeaseBuffer(store, size=2, idle=1.5)
    lease = buf.acquire()
    assert lease is not None and buf.release(lease) and buf.buffered == 1
    redis.Redis.from_url(redis_url).zrem(store.key, lease.holder)  # reaped elsewhere
    deadline = time.monotonic() + 1.5
    while buf.buffered and time.monotonic() < deadline:
        time.sleep(0.02)
    assert buf.buffered == 0 and lease.lost
    assert _sample(registry, "corevo_lease_buffer_total", "bl", outcome="lost") == 1
    fresh = buf.acquire()
    assert fresh is not None and fresh is not lease
    with buf.hold() as held:  # the other slot, through hold(): back into the buffer
        assert held.valid() and held is not fresh
    assert buf.buffered == 1
    buf.release(fresh)
    buf.close()
    store.close()


def test_async_buffer_hold_reuses_a_lease_and_cancels_on_loss(
        redis_url: str, registry: CollectorRegistry) -> None:
    from corevo_obs.core.errors import LeaseLost
    from corevo_obs.leases.buffer import AsyncLeaseBuffer

    async def scenario() -> None:
        store = store_for(redis_url, "ba", asynchronous=True, limit=1, worker="w0",
                          registry=registry, **TIMING)
        await store.declare_fresh()
        buf = AsyncLeaseBuffer(store, size=1, idle=1.5)
        async with buf.hold() as one:
            pass
        async with buf.hold() as two:
            assert two is one and buf.buffered == 0
        assert buf.buffered == 1
        redis.Redis.from_url(redis_url).zrem(store.key, one.holder)
        with pytest.raises(LeaseLost):
            async with buf.hold() as three:  # the buffered one; lost within a beat
                assert three is one
                await asyncio.sleep(2.0)
        assert buf.buffered == 0
        async with buf.hold() as four:
            assert four is not one
        await buf.aclose()
        assert await store.holders() == []
        await store.aclose()

    asyncio.run(scenario())


KILLED_CHILD = """
import sys, time
from tests.helpers.lease_kit import store_for
from tests.test_leases_cluster import cluster as cluster3  # noqa: F401 - a fixture
from corevo_obs.leases.buffer import LeaseBuffer
store = store_for(sys.argv[1], "bk", limit=3, timeout=2.0, heartbeat_interval=0.4,
                  margin=0.3)
buf = LeaseBuffer(store, size=3, idle=1.9)
leases = [buf.acquire() for _ in range(3)]
assert all(leases)
for lease in leases:
    buf.release(lease)
print("ready", buf.buffered, flush=True)
time.sleep(60)
"""


def test_a_sigkilled_workers_buffered_slots_come_back_after_one_timeout(
        redis_url: str, registry: CollectorRegistry, worker_env: dict[str, str]) -> None:
    store = store_for(redis_url, "bk", fresh=True, limit=3, registry=registry, **TIMING)
    child = subprocess.Popen([sys.executable, "-c", KILLED_CHILD, redis_url],
                             env=worker_env, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().split() == ["ready", "3"]
        time.sleep(0.9)  # two renewals: the buffered slots are heartbeated, not just held
        assert len(store.holders()) == 3 and store.acquire() is None
        beats = [score for _, score in store.holders()]
        assert min(beats) > store.server_time() - 0.4 - 0.2, "buffered leases not renewed"
        child.send_signal(signal.SIGKILL)
        child.wait()
        killed = time.monotonic()
    finally:
        if child.poll() is None:
            child.kill()
    got: list[Any] = []
    while len(got) < 3 and time.monotonic() < killed + 5:
        lease = store.acquire()
        if lease is None:
            time.sleep(0.02)
        else:
            got.append((lease, time.monotonic() - killed))
    assert len(got) == 3, "the dead worker's buffered slots never came back"
    first, last = got[0][1], got[-1][1]
    # expiry = last renewal + timeout, and the last renewal came within one interval
    assert TIMING["timeout"] - TIMING["heartbeat_interval"] - 0.1 <= first
    assert last <= TIMING["timeout"] + 0.3
    print(f"\nbuffered slots of a SIGKILLed worker back after {first:.2f}-{last:.2f} s "
          f"(timeout {TIMING['timeout']} s)")
    for lease, _ in got:
        lease.release()
    store.close()


# --- the storm on the Cluster -----------------------------------------------------------

LIMIT, SHARDS = 6, 3
WAITS: dict[str, Any] = {"socket_timeout": 0.3, "connect_timeout": 0.2}


async def _holders(cfg: dict[str, Any]) -> None:
    """A holder process: ``cfg['holders']`` tasks through one buffer; each hold writes
    ``E <hold id> t`` after the grant and ``X <hold id> t`` when its work ends."""
    import random

    from corevo_obs.core.errors import LeaseLost, LeaseRejected

    buf = store_for(cfg["where"], "bstorm", asynchronous=True, limit=LIMIT,
                    worker=cfg["worker"], **TIMING, **WAITS)
    fd = os.open(cfg["track"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    stats: Counter[str] = Counter()
    seen: set[str] = set()

    async def one(seed: int) -> None:
        rng = random.Random(seed)
        n = 0
        while time.monotonic() < cfg["until"]:
            n += 1
            work = rng.uniform(0.02, 0.3) if rng.random() < 0.9 else rng.uniform(0.5, 2.5)
            key = "t0" if rng.random() < 0.5 else f"t{rng.randrange(6)}"
            try:
                async with buf.hold(key=key, wait=1.0, poll=0.05) as lease:
                    hold_id = f"{lease.holder}#{seed}.{n}"
                    stats["reused"] += lease.holder in seen
                    seen.add(lease.holder)
                    os.write(fd, f"E {hold_id} {time.monotonic()!r}\n".encode())
                    try:
                        await asyncio.sleep(work)
                    finally:
                        os.write(fd, f"X {hold_id} {time.monotonic()!r}\n".encode())
                stats["completed"] += 1
            except LeaseLost as exc:
                stats[f"lost_{exc.reason}"] += 1
            except LeaseRejected:
                stats["rejected_waits"] += 1
            await asyncio.sleep(rng.uniform(0, 0.3))  # think time: demand comes and goes

    print("ready", flush=True)
    await asyncio.gather(*(one(cfg["seed"] * 100 + i) for i in range(cfg["holders"])))
    os.close(fd)
    await buf.aclose()
    print(json.dumps(dict(stats)), flush=True)


def test_storm_with_buffers_on_the_cluster_never_oversells_work(
        request: pytest.FixtureRequest, tmp_path: Path, worker_env: dict[str, str]) -> None:
    from tests.helpers.lease_tracker import max_overlap, read_spans

    cluster = request.getfixturevalue("cluster3")  # test_leases_cluster's 3-primary Cluster
    base = f"cluster://127.0.0.1:{cluster.ports[0]}?shards={SHARDS}"
    store_for(base, "bstorm", fresh=True, limit=LIMIT, **TIMING, **WAITS).close()
    until = time.monotonic() + 12.0
    procs, tracks = [], []
    for i in range(3):
        tracks.append(tmp_path / f"track{i}")
        cfg = {"where": base + "&buffer=2&idle_ms=300", "worker": f"b{i}", "holders": 3,
               "until": until, "track": str(tracks[-1]), "seed": i}
        procs.append(subprocess.Popen([sys.executable, str(HERE), "holder", json.dumps(cfg)],
                                      env=worker_env, stdout=subprocess.PIPE, text=True))
    stats: Counter[str] = Counter()
    victim = procs[0]
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        time.sleep(5.0)
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        killed = time.monotonic()
        for p in procs[1:]:
            out, _ = p.communicate(timeout=60)
            assert p.returncode == 0, out
            stats.update(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    spans, unfinished = read_spans(tracks)
    enters = {f[1]: float(f[2]) for f in (line.split() for line in tracks[0].read_text()
                                          .splitlines()) if f[0] == "E"}
    cut = [(enters[h], killed) for h in unfinished if h in enters]
    assert len(cut) == len(unfinished) <= 3  # only the SIGKILLed process left holds open
    spans += cut
    worst = max_overlap(spans)
    after = max_overlap(spans, since=killed + TIMING["timeout"] + 0.5)
    print(f"\nbuffered storm: {len(spans)} intervals ({len(cut)} cut by the SIGKILL), max "
          f"concurrency {worst} (limit {LIMIT}), {after} after the victim's slots expired; "
          f"holder stats {dict(stats)}")
    assert len(spans) >= 100
    assert worst <= LIMIT, f"{worst} holders worked at once on limit {LIMIT}"
    assert worst == LIMIT, "the limit was never reached: the run proved little"
    assert after == LIMIT, "the SIGKILLed worker's slots did not come back"
    assert stats["reused"] >= 10, "the buffers served almost nothing"


if __name__ == "__main__" and sys.argv[1:2] == ["holder"]:
    asyncio.run(_holders(json.loads(sys.argv[2])))
