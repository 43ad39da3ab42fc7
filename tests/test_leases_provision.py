"""Quotas that work on the first request: provisioning at deploy time (API and CLI) on a
real, freshly flushed redis-server; a fence on a never-provisioned quota says what to run;
an un-awaited declare_fresh()/provision() cannot pass silently."""

from __future__ import annotations

import asyncio
import gc
import logging
import subprocess
import sys

import pytest

from corevo_obs.leases import AsyncRedisLeaseStore, RedisLeaseStore


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "leases", *args],
                          capture_output=True, text=True, timeout=60)


def test_a_new_quota_is_fenced_and_says_what_to_run_once(redis_url, registry, caplog):
    store = RedisLeaseStore("fresh", redis_url, limit=2, timeout=30, registry=registry)
    with caplog.at_level(logging.WARNING, logger="corevo_obs"):
        assert store.acquire() is None and store.acquire() is None    # fenced, 30 s
    hints = [r for r in caplog.records if "leases provision fresh --redis" in r.message]
    assert len(hints) == 1
    assert store.provision() is False       # the marker exists: a running fence stays
    assert store.acquire() is None
    store.close()


def test_provisioned_at_deploy_the_first_request_is_served(redis_url, registry):
    done = _cli("provision", "llm", "--redis", redis_url)
    assert done.returncode == 0 and "provisioned" in done.stdout, done.stderr
    again = _cli("provision", "llm", "--redis", redis_url)
    assert again.returncode == 0 and "already provisioned" in again.stdout

    async def first_request() -> int:
        store = AsyncRedisLeaseStore("llm", redis_url, limit=10, timeout=30,
                                     registry=registry)
        async with store.hold(wait=5) as lease:   # the docs' example, at once
            token = lease.token
        await store.aclose()
        return token

    assert asyncio.run(first_request()) > 0


def test_provision_api_sync_and_async_is_idempotent(redis_url, registry):
    sync = RedisLeaseStore("a", redis_url, limit=1, registry=registry)
    assert sync.provision() is True and sync.provision() is False
    assert sync.acquire() is not None
    sync.close()

    async def main() -> tuple[bool, bool, bool]:
        store = AsyncRedisLeaseStore("b", redis_url, limit=1, registry=registry)
        made, again = await store.provision(), await store.provision()
        granted = await store.acquire() is not None
        await store.aclose()
        return made, again, granted

    assert asyncio.run(main()) == (True, False, True)


def test_cli_bad_input_is_one_line_and_exit_2(tmp_path):
    bad = _cli("provision", "q", "--redis", "redis://127.0.0.1:1/0")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    assert _cli("provision", "q", "--sqlite", str(tmp_path / "l.db"), "--key", "k"
                ).returncode == 2
    ok = _cli("provision", "q", "--sqlite", str(tmp_path / "l.db"))
    assert ok.returncode == 0 and "no restart fence" in ok.stdout


def test_declare_fresh_without_await_is_not_silent(redis_url, registry, caplog):
    async def main() -> bool:
        store = AsyncRedisLeaseStore("c", redis_url, limit=1, registry=registry)
        with caplog.at_level(logging.ERROR, logger="corevo_obs"), \
                pytest.warns(RuntimeWarning, match="without await"):
            store.declare_fresh()            # the documented mistake: no await
            gc.collect()
        fenced = await store.acquire() is None   # it did nothing: still fenced
        await store.declare_fresh()
        granted = await store.acquire() is not None
        await store.aclose()
        return fenced and granted

    assert asyncio.run(main())
    assert any("await AsyncRedisLeaseStore.declare_fresh()" in r.message
               for r in caplog.records)


def test_a_sharded_quota_is_provisioned_whole_and_its_hint_says_so(redis_url, registry,
                                                                  caplog):
    import redis as redis_lib

    from corevo_obs.core.errors import LeaseRejected
    from corevo_obs.leases import ShardedLeaseStore

    client = redis_lib.Redis.from_url(redis_url, socket_timeout=1, socket_connect_timeout=0.5)
    fresh = ShardedLeaseStore("s", client, limit=6, shards=3, timeout=30, registry=registry)
    with caplog.at_level(logging.WARNING, logger="corevo_obs"):
        fresh.rebalance()                    # the rebalancer lease is fenced: no limits
        with pytest.raises(LeaseRejected, match="fenced"):
            fresh.hold(key="t", wait=0.2).__enter__()
    assert any("corevo-obs leases provision s --redis URL --shards 3" in r.message
               for r in caplog.records)
    fresh.close()
    client.flushall()
    done = _cli("provision", "s", "--redis", redis_url, "--shards", "3")
    assert done.returncode == 0 and "provisioned" in done.stdout, done.stderr
    quota = ShardedLeaseStore("s", client, limit=6, shards=3, timeout=30, registry=registry)
    quota.rebalance()                        # the first round opens the quota at once
    lease = quota.acquire(key="t", wait=1.0)
    assert lease is not None
    lease.release()
    quota.close()
    client.close()
    assert _cli("provision", "s", "--redis", redis_url, "--shards", "0").returncode == 2
