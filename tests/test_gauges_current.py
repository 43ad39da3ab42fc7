"""Gauges an alert reads are current: none exposed before it has a value, lease held
follows releases, renewals and audits (not only acquires), a fenced admission counts once."""

from __future__ import annotations

import asyncio
import time

import pytest
from prometheus_client import CollectorRegistry

from corevo_obs.leases import LeaseAuditor
from corevo_obs.loop import LoopLagSampler
from tests.helpers.lease_kit import store_for

HEARTBEAT = "corevo_event_loop_heartbeat_timestamp_seconds"


def test_heartbeat_is_not_exposed_before_its_first_stamp(registry: CollectorRegistry) -> None:
    """A series born at 0 reads as a heartbeat 56 years old (time() - 0) to every alert."""
    async def main() -> tuple[float | None, float | None]:
        sampler = LoopLagSampler(worker="hb", registry=registry, interval=0.01)
        before = registry.get_sample_value(HEARTBEAT, {"worker": "hb"})
        sampler.start()
        await asyncio.sleep(0.05)
        after = registry.get_sample_value(HEARTBEAT, {"worker": "hb"})
        await sampler.aclose()
        return before, after

    t0 = time.time()
    before, after = asyncio.run(main())
    assert before is None
    assert after is not None and t0 <= after <= time.time()
    names = {m.name for m in registry.collect() for _ in m.samples}
    assert "corevo_event_loop_heartbeat_timestamp_seconds" in names


def _held(registry: CollectorRegistry) -> float | None:
    return registry.get_sample_value("corevo_lease_held", {"quota": "q"})


@pytest.fixture(params=["redis", "sqlite"])
def where(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "redis":
        return str(request.getfixturevalue("redis_url"))
    return str(tmp_path / "leases.db")


def test_held_follows_release_renewal_and_audit(where: str) -> None:
    """The issue's idle quota: 4 of 4 held, all released, the gauge must read 0 (it read 4
    and CorevoLeaseSaturated fired on a quota nobody used)."""
    mine, theirs = CollectorRegistry(), CollectorRegistry()
    store = store_for(where, "q", fresh=True, limit=4, timeout=1.0, worker="w0", registry=mine)
    other = store_for(where, "q", limit=4, timeout=1.0, worker="w1", registry=theirs)
    try:
        leases = [store.acquire() for _ in range(4)]
        assert all(lease is not None for lease in leases)
        assert _held(mine) == 4
        assert mine.get_sample_value("corevo_lease_limit", {"quota": "q"}) == 4
        # the auditor's gauges wait for an audit: "0 orphaned" would be a reading not taken
        assert mine.get_sample_value("corevo_lease_orphaned_holders", {"quota": "q"}) is None
        for n, lease in enumerate(leases[:3], start=1):
            assert lease is not None and lease.release()
            assert _held(mine) == 4 - n
        # another worker releases the last one: this worker's gauge learns of it at its
        # next renewal (here, of a lease it takes again), not only at an acquire
        again = store.acquire()
        assert again is not None and _held(mine) == 2
        assert other.release(leases[3].holder) is True  # type: ignore[union-attr]
        assert _held(theirs) == 1 and _held(mine) == 2
        assert again.heartbeat() is True
        assert _held(mine) == 1
        assert again.release() and _held(mine) == 0
        # holders that die without releasing: the auditor's count drops them once expired
        ghosts = [store.acquire() for _ in range(2)]
        assert _held(mine) == 2 and all(g is not None for g in ghosts)
        time.sleep(1.15)
        LeaseAuditor(store).audit()
        assert _held(mine) == 0
        oldest = mine.get_sample_value("corevo_lease_oldest_heartbeat_age_seconds",
                                       {"quota": "q"})
        assert oldest is not None and oldest >= 1.0
    finally:
        store.close()
        other.close()


def test_fenced_admission_counts_once(redis_url: str, registry: CollectorRegistry) -> None:
    """A waiting admission retried every poll while a restart fence runs is one fenced
    admission (it was 60 per request), then one grant."""
    store = store_for(redis_url, "q", limit=2, timeout=1.0, worker="w0", registry=registry)
    try:
        t0 = time.monotonic()
        lease = store.acquire(wait=3.0, poll=0.02)   # the marker was missing: fenced ~1 s
        assert time.monotonic() - t0 >= 0.9
        tries = registry.get_sample_value("corevo_lease_acquire_seconds_count",
                                          {"worker": "w0", "quota": "q"})
        counted = {o: registry.get_sample_value("corevo_lease_acquire_total",
                                                {"worker": "w0", "quota": "q", "outcome": o})
                   for o in ("fenced", "granted", "rejected")}
        assert counted == {"fenced": 1, "granted": 1, "rejected": 0}
        assert tries is not None and tries >= 2   # the first try and the grant
        assert not store._fenced                 # the admission left the fence
        store.client.flushall()                 # a second fence: a new admission counts
        assert store.acquire() is None and store.acquire() is None
        assert registry.get_sample_value("corevo_lease_acquire_total", {
            "worker": "w0", "quota": "q", "outcome": "fenced"}) == 3
        lease.release()
    finally:
        store.close()
