"""Leases on a real 3-primary Redis Cluster: cluster clients, a sharded quota under a storm.

The storm reuses the fault suite's holders and its independent tracker: four holder
processes of loss-aware holders (with think time) on a sharded limit-6 quota (3 shards,
one per primary), callers skewed — two processes × four holders hold only for tenant
``t0``, on its home shard and the next (``spill=2``), two × two spread over six tenants
and every shard — every process running the rebalancer (one acts at a time), and the
process that leads the rebalance SIGKILLed mid-run. Each holder writes its own grant →
end-of-work interval; the sweep over them must never exceed 6. Beside it the parent
samples the shard limits: their sum must never exceed 6 either, and capacity must have
moved.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.conftest import _need, helper_cmd
from tests.helpers.lease_kit import store_for
from tests.helpers.lease_tracker import max_overlap, read_spans
from tests.helpers.redis_topology import RedisCluster3, TopologyError

LIMIT, SHARDS, TIMEOUT, INTERVAL, MARGIN = 6, 3, 2.0, 0.4, 0.4
WAITS: dict[str, Any] = {"socket_timeout": 0.3, "connect_timeout": 0.2}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Any:
    try:
        topo = RedisCluster3(tmp_path_factory.mktemp("cluster"))
    except TopologyError as exc:
        _need(str(exc))
    yield topo
    topo.close()


def _client(cluster: RedisCluster3) -> Any:
    import redis.cluster

    return redis.cluster.RedisCluster(host="127.0.0.1", port=cluster.ports[0],
                                      socket_timeout=0.3, socket_connect_timeout=0.2,
                                      retry=Retry(NoBackoff(), 0))


def test_a_store_on_a_cluster_client_routes_every_key_of_a_quota_to_one_slot(
        cluster: RedisCluster3, registry: CollectorRegistry) -> None:
    from corevo_obs.leases.redis_store import RedisLeaseStore

    client = _client(cluster)
    store = RedisLeaseStore("cl-one", client, limit=2, timeout=2.0, heartbeat_interval=0.4,
                            margin=0.3, registry=registry)
    assert store.store_wait()[0] == pytest.approx(0.5)  # (0.3 + 0.2) x 1 try, no retries
    assert len({client.keyslot(k) for k in store.keys}) == 1
    store.declare_fresh()
    a, b = store.acquire(), store.acquire()
    assert a is not None and b is not None and b.token > a.token
    assert store.acquire() is None
    assert a.heartbeat() and a.release() and not a.release()
    assert abs(store.server_time() - time.time()) < 2
    assert [h for h, _ in store.holders()] == [b.holder]
    # the quota's keys live on the node that owns their slot
    node = client.get_node_from_key(store.key)
    assert redis.Redis(port=node.port).exists(store.key) == 1


def test_async_cluster_store_and_sharded_cancel_channel(cluster: RedisCluster3,
                                                        registry: CollectorRegistry) -> None:
    import redis.asyncio.cluster as acluster
    from redis.asyncio.retry import Retry as ARetry

    from corevo_obs.cancel.bus import Command
    from corevo_obs.cancel.redis_bus import RedisCancelBus, marker_key
    from corevo_obs.leases.redis_store import AsyncRedisLeaseStore

    async def scenario() -> None:
        client = acluster.RedisCluster(host="127.0.0.1", port=cluster.ports[1],
                                       socket_timeout=0.3, socket_connect_timeout=0.2,
                                       retry=ARetry(NoBackoff(), 0))
        store = AsyncRedisLeaseStore("cl-async", client, limit=1, timeout=2.0,
                                     heartbeat_interval=0.4, margin=0.3, registry=registry)
        await store.declare_fresh()
        async with store.hold() as lease:
            assert await lease.heartbeat()
            assert await store.acquire() is None
        assert abs(await store.server_time() - time.time()) < 2

        bus = RedisCancelBus(client)
        assert await bus.sharded()
        sub = await bus.subscribe("owner-1")
        cmd = Command("cancel", "job", "owner-1", 1, "ex-1", time.time())
        for _ in range(50):  # until the subscription is registered on its shard
            if await bus.send(cmd) == 1:
                break
            await asyncio.sleep(0.02)
        assert (await asyncio.wait_for(sub.get(), 2)) == cmd
        await bus.mark("ex-1", 1.5, 5)
        assert await bus.marker("ex-1") == 1.5
        assert client.keyslot(marker_key("ex-1")) == client.keyslot("{ex-1}")
        await sub.aclose()
        await client.aclose()

    asyncio.run(scenario())


def test_shard_names_spread_over_the_three_primaries(cluster: RedisCluster3) -> None:
    from corevo_obs.leases.sharded import shard_names

    client = _client(cluster)
    for k in (3, 6, 12):
        names = shard_names("hot", k)
        assert len(set(names)) == k
        ports = [client.get_node_from_key(f"corevo:lease:{{{n}}}").port for n in names]
        counts = [ports.count(p) for p in cluster.ports]
        assert counts == [k // 3] * 3, (k, counts)


def test_rebalance_moves_idle_capacity_and_a_stale_rebalancer_is_fenced(
        cluster: RedisCluster3, registry: CollectorRegistry) -> None:
    from corevo_obs.leases.sharded import ShardedLeaseStore

    client = _client(cluster)
    quota = ShardedLeaseStore("rb", client, limit=6, shards=3, timeout=2.0,
                              heartbeat_interval=0.4, margin=0.3, registry=registry)
    quota.declare_fresh()
    assert quota.rebalance() == 0  # the first round: the deficit of 6, spread evenly
    assert [limit for _, limit in quota.view()] == [2, 2, 2]
    home = quota.order("t0")[0]
    leases = [quota.acquire(key="t0") for _ in range(4)]  # home full after two: spills spread
    assert all(lease is not None for lease in leases)
    assert sorted(lease.quota for lease in leases if lease) == sorted(
        [quota.names[home]] * 2 + [n for n in quota.names if n != quota.names[home]])
    assert quota.rebalance() == 0  # no rejection, so no miss: nothing to move
    rest = [quota.acquire(key="t0"), quota.acquire(key="t0")]
    assert all(lease is not None for lease in rest)
    stalest = min(range(3), key=lambda i: quota.shards[i].seen_at)
    assert quota.acquire(key="t0") is None  # all full: one try, on the shard seen longest ago
    assert [int(client.get(s.misses_key) or 0) for s in quota.shards] == [
        int(i == stalest) for i in range(3)]
    for lease in [*leases, *rest]:
        if lease is not None and lease.quota != quota.names[stalest]:
            lease.release()  # two idle slots on each other shard
    assert quota.rebalance() == 1  # half of one idle shard's two free slots, for the miss
    assert quota.rebalance() == 0  # no misses since
    after = [limit for _, limit in quota.view()]
    assert after[stalest] == 3 and sum(after) == 6, after
    got = [quota.acquire(key="t0") for _ in range(4)]  # the 4 free slots, wherever they are
    assert all(lease is not None for lease in got) and quota.acquire(key="t0") is None
    assert registry.get_sample_value("corevo_lease_rebalanced_total",
                                     {"worker": quota.shards[0].worker, "quota": "rb"}) == 1
    # a rebalancer with an older token than one already seen is refused everywhere
    stale = quota._call((0, "raise", 5, 1))
    assert int(stale[0]) == -1
    assert sum(limit for _, limit in quota.view()) == 6
    quota.close()


def _limits(client: Any, names: list[str]) -> tuple[int, ...]:
    return tuple(int(client.get(f"corevo:lease:{{{n}}}:limit") or 0) for n in names)


def _killed_spans(track: Path, unfinished: list[str], killed: float) -> list[tuple[float, float]]:
    """The SIGKILLed process's open holds: they worked until the kill."""
    enters = {f[1]: float(f[2]) for f in (line.split() for line in track.read_text().splitlines())
              if f[0] == "E"}
    return [(enters[h], killed) for h in unfinished if h in enters]


def test_sharded_storm_on_the_cluster_never_oversells_work(
        cluster: RedisCluster3, tmp_path: Path, worker_env: dict[str, str]) -> None:
    where = f"cluster://127.0.0.1:{cluster.ports[0]}?shards={SHARDS}"
    store_for(where, "storm", fresh=True, limit=LIMIT, timeout=TIMEOUT,
              heartbeat_interval=INTERVAL, margin=MARGIN, **WAITS).close()
    names = store_for(where, "storm", limit=LIMIT, timeout=TIMEOUT,
                      heartbeat_interval=INTERVAL, margin=MARGIN, **WAITS).names
    cluster.reset_stats()
    t0 = time.monotonic()
    until = t0 + 16.0
    procs, tracks = [], []
    for i in range(4):
        tracks.append(tmp_path / f"track{i}")
        # two processes hold only for tenant t0, on its home shard and the next (spill 2):
        # their misses make the rebalancer move capacity there; two lighter ones spread
        # over 6 tenants and every shard (the default spill)
        hot = i < 2
        cfg = {"where": where + ("&spill=2" if hot else ""), "quota": "storm",
               "limit": LIMIT, "timeout": TIMEOUT, "interval": INTERVAL, "margin": MARGIN,
               "worker": f"h{i}", "waits": WAITS, "holders": 4 if hot else 2,
               "short": (0.05, 0.4), "long": (0.5, 1.5), "p_long": 0.2, "pause": 0.6,
               "wait": 1.0, "poll": 0.05, "until": until, "track": str(tracks[-1]),
               "seed": i, "keys": 1 if hot else 6}
        procs.append(subprocess.Popen(helper_cmd("lease_fault_holder.py", json.dumps(cfg)),
                                      env=worker_env, stdout=subprocess.PIPE, text=True))
    splits: list[tuple[int, ...]] = []
    stop = threading.Event()

    def sample() -> None:
        client = _client(cluster)
        while not stop.is_set():
            splits.append(_limits(client, names))
            time.sleep(0.01)
        client.close()

    sampler = threading.Thread(target=sample, daemon=True)
    try:
        for p in procs:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        sampler.start()
        time.sleep(6.0)
        # SIGKILL the process whose rebalancer leads (holder ids name the pid)
        leader = redis.Redis(port=_client(cluster).get_node_from_key(
            "corevo:lease:{storm.rebalance}").port).zrange("corevo:lease:{storm.rebalance}",
                                                           0, -1)
        victim = next(p for p in procs if leader and f":{p.pid}.".encode() in leader[0])
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        killed = time.monotonic()
        stats: dict[str, int] = {}
        for p in procs:
            if p is victim:
                continue
            out, _ = p.communicate(timeout=60)
            assert p.returncode == 0, out
            for k, v in json.loads(out.strip().splitlines()[-1]).items():
                stats[k] = stats.get(k, 0) + v
    finally:
        stop.set()
        for p in procs:
            if p.poll() is None:
                p.kill()
    sampler.join(5)
    spans, unfinished = read_spans(tracks)
    cut = _killed_spans(tracks[procs.index(victim)], unfinished, killed)
    assert len(cut) == len(unfinished) <= 5  # only the SIGKILLed process left holds open
    spans += cut
    evalsha = {p: s.get("evalsha", 0) for p, s in cluster.commandstats().items()}
    worst = max_overlap(spans)
    sums = [sum(x) for x in splits]
    print(f"\ncluster storm: {len(spans)} intervals ({len(cut)} cut by the SIGKILL), max "
          f"concurrency {worst} (limit {LIMIT}); shard limits sampled {len(splits)}x, sum in "
          f"[{min(sums)}, {max(sums)}], {len(set(splits))} distinct splits (e.g. "
          f"{sorted(set(splits))[:4]}); EVALSHA per primary {list(evalsha.values())}; "
          f"holder stats {stats}")
    assert len(spans) >= 100
    assert worst <= LIMIT, f"{worst} holders worked at once on limit {LIMIT}"
    assert worst == LIMIT, "the limit was never reached: the run proved little"
    assert max(sums) <= LIMIT, f"shard limits summed to {max(sums)} > {LIMIT}"
    assert len(set(splits)) >= 2, "capacity never moved between shards"
    share = max(evalsha.values()) / sum(evalsha.values())
    assert share < 0.8, f"one primary served {share:.0%} of the scripts"
