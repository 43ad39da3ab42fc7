"""Leases through a Sentinel failover: a real primary, one replica, three Sentinels.

The storm reuses the fault suite's holders and independent tracker: four holder processes
× four loss-aware holders on a limit-3 quota through Sentinel-managed clients
(``replicas=1``: a grant or renewal counts only once ``WAIT 1`` says the replica has it).
During the storm the parent forces ``SENTINEL FAILOVER``, waits for the old primary to
come back as a replica, then SIGKILLs the new primary so the Sentinels promote again (and
restarts the killed one, empty, as the new replica). The
sweep over the holders' own grant → end-of-work intervals must never exceed 3; after each
promotion no grant may come before one lease timeout (the run-id fence: the promoted
replica has the marker, but another ``run_id``), and work must resume; a second quota on
a store without ``replicas`` is fenced on the promoted primary too. The holders run
until the parent says stop (SIGUSR1), some seconds after the second replica is linked again: how
long a relink takes is Sentinel's business (5 to 17 s), the work after it is the test's.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from tests.conftest import _need
from tests.helpers.lease_holders import kill_left, start_holders, stop_holders
from tests.helpers.lease_kit import store_for
from tests.helpers.lease_tracker import first_at, max_overlap, read_spans
from tests.helpers.redis_topology import SentinelSet, TopologyError

LIMIT, TIMEOUT, INTERVAL, MARGIN = 3, 3.5, 0.5, 0.5
WAITS: dict[str, Any] = {"socket_timeout": 0.3, "connect_timeout": 0.2}


def _where(s: SentinelSet) -> str:
    return "sentinel://" + ",".join(f"{h}:{p}" for h, p in s.addresses) + "/corevo?replicas=1"


def _metric(mp: Path, name: str, **labels: str) -> float:
    reg = CollectorRegistry()
    MultiProcessCollector(reg, path=str(mp))
    total = 0.0
    for fam in reg.collect():
        for sample in fam.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def test_storm_through_sentinel_failover_and_primary_sigkill_never_oversells(
        tmp_path: Path, worker_env: dict[str, str]) -> None:
    try:
        topo = SentinelSet(tmp_path / "sentinel")
    except TopologyError as exc:
        _need(str(exc))
    procs: list[subprocess.Popen[str]] = []
    try:
        where = _where(topo)
        store = store_for(where, "fo", fresh=True, limit=LIMIT, timeout=TIMEOUT,
                          heartbeat_interval=INTERVAL, margin=MARGIN, **WAITS)
        print(f"\nstore wait {store.store_wait()[0]:.2f}s (master + 3 Sentinel look-ups + WAIT)")
        lease = store.acquire()
        assert lease is not None and lease.release()  # WAIT 1 confirmed by the replica
        store.close()
        # a quota whose store does not wait for replicas: the run-id fence is its own
        plain = store_for(where.replace("replicas=1", "replicas=0"), "fo0", limit=1,
                          timeout=TIMEOUT, heartbeat_interval=INTERVAL, margin=MARGIN,
                          **WAITS)
        assert plain.provision() and plain.acquire() is not None
        t0 = time.monotonic()
        until = t0 + 150.0  # a safety net only: SIGUSR1 ends the run
        procs, tracks = start_holders(
            worker_env, tmp_path, 4, where=where, quota="fo", limit=LIMIT, timeout=TIMEOUT,
            interval=INTERVAL, margin=MARGIN, waits=WAITS, holders=4, short=(0.2, 1.0),
            long=(3.0, 6.0), p_long=0.3, wait=1.0, poll=0.05, until=until)
        time.sleep(max(0.0, t0 + 5.0 - time.monotonic()))
        first = topo.failover()
        promoted = [time.monotonic()]
        # new connections ask the Sentinels; an old one would still reach the old primary,
        # a master for seconds after SENTINEL FAILOVER (docs: split brain, not covered)
        for _ in range(20):  # until a new connection reaches the promoted primary: the
            plain.client.connection_pool.disconnect()  # old one may still answer a while
            plain.acquire()
            if plain._last_outcome == "fenced":
                break
            time.sleep(0.25)
        assert plain._last_outcome == "fenced", "replicas=0: a promoted replica granted"
        plain.close()
        topo.wait_replica_link()
        relinked = [time.monotonic()]
        time.sleep(max(0.0, promoted[0] + TIMEOUT - time.monotonic()) + 4.0)
        old = topo.master()
        second = topo.kill_primary()
        promoted.append(time.monotonic())
        assert first != second
        topo.restart_as_replica(old)  # fail closed until a replica can confirm again
        topo.wait_replica_link()
        relinked.append(time.monotonic())
        time.sleep(max(0.0, promoted[1] + TIMEOUT - time.monotonic()) + 8.0)
        stats = stop_holders(procs, timeout=90)
    finally:
        kill_left(procs)
        topo.close()

    spans, unfinished = read_spans(tracks)
    worst = max_overlap(spans)
    mp = Path(worker_env["PROMETHEUS_MULTIPROC_DIR"])
    fenced = _metric(mp, "corevo_lease_acquire_total", outcome="fenced")
    lagged = _metric(mp, "corevo_lease_replica_wait_timeouts_total")
    print(f"sentinel storm: {len(spans)} intervals, max concurrency {worst} (limit {LIMIT}), "
          f"acquires fenced {fenced:.0f}, WAIT timeouts {lagged:.0f}, stats {stats}; "
          f"SENTINEL FAILOVER at +{promoted[0] - t0:.1f}s, replica back at "
          f"+{relinked[0] - t0:.1f}s, SIGKILL promotion at +{promoted[1] - t0:.1f}s, "
          f"replica back at +{relinked[1] - t0:.1f}s")
    print("  grants at +s:", " ".join(f"{a - t0:.1f}" for a, _ in sorted(spans)),
          f"| primary SIGKILLed at +{topo.killed_at - t0:.1f}s")
    assert not unfinished, unfinished[:3]
    assert len(spans) >= 20
    assert worst <= LIMIT, f"{worst} holders worked at once on limit {LIMIT}"
    assert worst == LIMIT, "the limit was never reached: the run proved little"
    assert fenced > 0, "no acquire was fenced after a failover"
    for at, linked in zip(promoted, relinked, strict=True):
        early = [a for a, _ in spans if at < a < at + TIMEOUT - 0.3]
        assert not early, f"granted {early[0] - at:.2f}s after a promotion (fence {TIMEOUT}s)"
        # no replica, no grant (WAIT fails closed): work resumes once one is linked again
        resumed = first_at([s for s in spans if s[0] > at], 1, at)
        assert resumed is not None, f"work never resumed after the promotion at {at - t0:.1f}"
        print(f"  promotion at +{at - t0:.1f}s: replica linked after {linked - at:.2f}s, "
              f"first grant after {resumed - at:.2f}s (fence {TIMEOUT}s)")
        assert resumed - max(linked, at + TIMEOUT) < 3.0


@pytest.mark.parametrize("fail_open", [False, True])
def test_wait_timeout_rejects_the_grant_unless_configured(
        tmp_path: Path, registry: CollectorRegistry, fail_open: bool,
        redis_url: str) -> None:
    """A primary without a replica: WAIT 1 times out. Fail closed: the grant is given back
    and rejected; ``replica_fail_open``: kept. Counted either way."""
    import redis

    from corevo_obs.leases.redis_store import RedisLeaseStore

    client = redis.Redis.from_url(redis_url, socket_timeout=0.3, socket_connect_timeout=0.2)
    store = RedisLeaseStore("lag", client, limit=2, timeout=3.0, heartbeat_interval=0.5,
                            margin=0.3, replicas=1, wait_timeout=0.05,
                            replica_fail_open=fail_open, registry=registry)
    store.declare_fresh()
    lease = store.acquire()
    timeouts = registry.get_sample_value("corevo_lease_replica_wait_timeouts_total", {
        "worker": store.worker, "quota": "lag", "op": "acquire"})
    assert timeouts == 1
    if fail_open:
        assert lease is not None and [h for h, _ in store.holders()] == [lease.holder]
        assert not lease.heartbeat()  # a renewal no replica confirmed confirms nothing
        assert not lease.lost          # ... but the deadline still stands
    else:
        assert lease is None and store.holders() == []
    # the run-id key sits beside the marker, in the quota's hash tag
    assert client.get(f"{store.key}:run") is not None


def test_a_sharded_quota_waits_for_replicas_too(registry: CollectorRegistry,
                                                redis_url: str) -> None:
    """Each shard is a lease quota of its own and overrides the acquire; the WAIT rule
    must still hold there: without a replica the shard's grant is taken back."""
    import redis

    from corevo_obs.leases.sharded import ShardedLeaseStore

    client = redis.Redis.from_url(redis_url, socket_timeout=0.3, socket_connect_timeout=0.2)
    common: dict[str, Any] = {"limit": 4, "shards": 2, "timeout": 3.0,
                              "heartbeat_interval": 0.5, "margin": 0.3}
    setup = ShardedLeaseStore("shlag", client, registry=CollectorRegistry(), **common)
    setup.declare_fresh()
    assert setup.rebalance() == 0  # the shard limits set by a store that needs no replica
    quota = ShardedLeaseStore("shlag", client, replicas=1, wait_timeout=0.05,
                              registry=registry, **common)
    quota.declare_fresh()  # records the server's run id, which the replicas' fence reads
    assert quota.acquire(key="t0") is None
    assert all(s.holders() == [] for s in quota.shards), "an unconfirmed grant was kept"
    timeouts = sum(registry.get_sample_value("corevo_lease_replica_wait_timeouts_total", {
        "worker": s.worker, "quota": s.quota, "op": "acquire"}) or 0 for s in quota.shards)
    assert timeouts >= 1
    setup.close()
    quota.close()
