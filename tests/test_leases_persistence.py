"""A Redis that comes back from its own persistence must fence, whatever its files restored.

The minimal case of issue 35: limit 1, default store options, a snapshot, holder A
granted, redis-server SIGKILLed and restarted from that ``dump.rdb``. The snapshot
restores the quota's marker (so a marker-only fence sees nothing) but not A's grant:
without a check that notices the restart, B is granted while A is still valid. The store
must refuse B (``fenced``) and A's next renewal must say lost. The same through a Redis
Cluster client (a one-node Cluster restarted from its snapshot), a restore of an older
dump, and with the append-only file (which keeps A: then the limit refuses B anyway, and
a fence is only the price of not knowing).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import redis

from tests.conftest import _need
from tests.helpers.redis_persist import PersistentRedis, ServerGone

pytestmark = pytest.mark.system
TRIES = 4


def _server(d: Path, mode: str, *extra: str) -> PersistentRedis:
    try:
        server = PersistentRedis(d, mode, extra=extra)
        server.start()
    except ServerGone as exc:
        _need(str(exc))
    return server


def _plain(url: str, quota: str) -> Any:
    from corevo_obs.leases.redis_store import RedisLeaseStore

    return RedisLeaseStore(quota, url, limit=1)


def _cluster(url: str, quota: str) -> Any:
    from redis.backoff import NoBackoff
    from redis.cluster import RedisCluster
    from redis.retry import Retry

    from corevo_obs.leases.redis_store import RedisLeaseStore

    port = int(url.rsplit(":", 1)[1].split("/")[0])
    client = RedisCluster(host="127.0.0.1", port=port, socket_timeout=2,
                          socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    return RedisLeaseStore(quota, client, limit=1)


def _cluster_ok(server: PersistentRedis) -> bool:
    with server.client() as c:
        return b"cluster_state:ok" in c.execute_command("CLUSTER", "INFO")


def _one_node_cluster(server: PersistentRedis) -> None:
    """All slots on the one node (kept in nodes.conf across restarts)."""
    with server.client() as c:
        c.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
    give_up = time.monotonic() + 10
    while not _cluster_ok(server):
        if time.monotonic() > give_up:
            _need("one-node cluster did not come up")
        time.sleep(0.05)


def _oversold(server: PersistentRedis, make: Any, quota: str, *,
              restore: Path | None = None) -> tuple[bool, bool]:
    """One try: provision, snapshot, A granted, SIGKILL, restart (from ``restore``, an
    older dump, when given). Whether B was granted while A is valid, and whether A's
    renewal still confirms."""
    store = make(server.url, quota)
    store.provision()
    server.save()
    a = store.acquire()
    assert a is not None, "A was refused on an empty quota"
    store.close()
    server.kill()
    if restore is not None:
        shutil.copy(restore, server.dir / "dump.rdb")
    server.start()
    while make is _cluster and not _cluster_ok(server):
        time.sleep(0.05)
    b_store = make(server.url, quota)
    b = b_store.acquire()
    a_store = make(server.url, quota)
    renewed = a_store.heartbeat(a.holder)
    for s in (a_store, b_store):
        s.close()
    return b is not None, renewed


@pytest.mark.parametrize("client", ["plain", "cluster"])
def test_a_restart_from_the_snapshot_fences_instead_of_granting_twice(
        tmp_path: Path, client: str) -> None:
    extra = ("cluster-enabled yes", f"cluster-config-file {tmp_path / 'nodes.conf'}") \
        if client == "cluster" else ()
    server = _server(tmp_path / "r", "rdb", *extra)
    make = _plain if client == "plain" else _cluster
    try:
        if client == "cluster":
            _one_node_cluster(server)
        twice = []
        for i in range(TRIES):
            granted, renewed = _oversold(server, make, f"rdb{i}")
            twice.append(granted)
            assert not renewed, "A's grant came after the snapshot: its renewal must fail"
        print(f"\n{client}: B granted while A valid in {sum(twice)} of {TRIES} restarts")
        assert not any(twice), f"oversold after {sum(twice)} of {TRIES} restarts from RDB"
    finally:
        server.close()


def test_a_restore_of_an_older_dump_fences(tmp_path: Path) -> None:
    server = _server(tmp_path / "r", "rdb")
    try:
        store = _plain(server.url, "restored")
        store.provision()
        server.save()
        old = tmp_path / "backup.rdb"
        shutil.copy(server.dir / "dump.rdb", old)
        store.close()
        granted, _ = _oversold(server, _plain, "restored", restore=old)
        assert not granted, "a restored backup granted a slot that is still held"
    finally:
        server.close()


@pytest.mark.parametrize("mode", ["aof-everysec", "aof-always"])
def test_a_restart_from_the_append_only_file_keeps_the_grant(tmp_path: Path,
                                                             mode: str) -> None:
    server = _server(tmp_path / "r", mode)
    try:
        granted, renewed = _oversold(server, _plain, "aof")
        # SIGKILL leaves what was written to the file (the page cache survives a process):
        # A is still there and renews; B is refused by the fence (and the limit).
        assert not granted
        assert renewed
        with redis.Redis(port=server.port) as c:
            assert c.zcard("corevo:lease:{aof}") == 1
    finally:
        server.close()
