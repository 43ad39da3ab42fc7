"""Acquire storm on a real redis-server: processes race for a quota and get SIGKILLed.

Four (and their replacements) storm processes × 16 asyncio tasks contend for a limit-6
quota with a 1 s lease timeout; every ~0.8 s one process is killed mid-hold. An
independent tracker (each holder's own enter/exit timestamps) must never show more than
the limit at once; ghosts left by the killed holders (read from the ZSET right after each
kill) must all be reaped — the reaped counter equals their number — and the quota must
reach its full limit again once the timeout has passed after the last kill.
"""

from __future__ import annotations

import random
import signal
import subprocess
import time

from prometheus_client import CollectorRegistry, multiprocess

from corevo_obs.leases import LeaseAuditor, RedisLeaseStore
from corevo_obs.leases.holder import HolderId
from tests.conftest import helper_cmd
from tests.helpers.lease_kit import store_for
from tests.helpers.lease_tracker import max_overlap

LIMIT, TIMEOUT, PROCS, TASKS = 6, 1.0, 4, 16
KILLS, KILL_EVERY, STORM = 5, 0.8, 7.0


def _spawn(url, deadline, track, env):
    proc = subprocess.Popen(
        helper_cmd("lease_storm.py", url, "storm", str(LIMIT), str(TIMEOUT), str(TASKS),
                   repr(deadline), str(track)),
        env=env, stdout=subprocess.PIPE, text=True,
    )
    return proc


def _intervals(tracks, killed_at):
    """Holder intervals from the track files; a killed holder's ends at its death."""
    spans: dict[str, list[float]] = {}
    for track in tracks:
        if not track.exists():
            continue
        for line in track.read_text().splitlines():
            kind, holder, t = line.split()
            spans.setdefault(holder, []).append(float(t))
    out, unfinished = [], []
    for holder, times in spans.items():
        if len(times) == 2:
            out.append((times[0], times[1]))
            continue
        pid = HolderId.parse(holder).pid
        if pid not in killed_at:
            unfinished.append(holder)  # a live process that never wrote its exit: a bug
        out.append((times[0], max(times[0], killed_at.get(pid, times[0]))))
    return out, unfinished


def _mp_total(path, name, **labels):
    reg = CollectorRegistry()
    multiprocess.MultiProcessCollector(reg, path=str(path))
    return sum(s.value for m in reg.collect() for s in m.samples
               if s.name == name and labels.items() <= s.labels.items())


def test_storm_never_oversells_and_reaps_every_killed_holder(redis_url, worker_env, tmp_path,
                                                            registry):
    rng = random.Random(4)
    store: RedisLeaseStore = store_for(redis_url, "storm", fresh=True, limit=LIMIT,
                                       timeout=TIMEOUT, worker="audit", registry=registry)
    auditor = LeaseAuditor(store)
    start = time.monotonic()
    deadline = start + STORM
    procs, tracks = [], []
    try:
        for i in range(PROCS):
            tracks.append(tmp_path / f"track{i}")
            procs.append(_spawn(redis_url, deadline, tracks[-1], worker_env))
        for p in procs:
            assert p.stdout.readline().strip() == "ready"

        killed_at: dict[int, float] = {}
        ghosts: set[str] = set()
        max_zcard = 0
        for k in range(KILLS):
            next_kill = start + KILL_EVERY * (k + 1) + rng.uniform(-0.15, 0.15)
            while time.monotonic() < next_kill:  # sample the ZSET itself meanwhile
                max_zcard = max(max_zcard, store.client.zcard(store.key))
                time.sleep(0.005)
            victim = procs.pop(rng.randrange(len(procs)))
            victim.send_signal(signal.SIGKILL)
            victim.wait()
            killed_at[victim.pid] = time.monotonic()
            time.sleep(0.05)  # anything the victim had already sent reaches the server first
            report = auditor.audit()
            ghosts |= {h for h in report.orphaned if HolderId.parse(h).pid in killed_at}
            tracks.append(tmp_path / f"track{len(tracks)}")
            procs.append(_spawn(redis_url, deadline, tracks[-1], worker_env))
        last_kill = max(killed_at.values())
        assert deadline - last_kill > TIMEOUT + 0.5, "storm too short to show recovery"
        for p in procs:
            assert p.wait(timeout=30) == 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    spans, unfinished = _intervals(tracks, killed_at)
    assert not unfinished
    assert len(spans) > 200, "the storm barely granted anything"
    assert max_zcard <= LIMIT
    assert max_overlap(spans) <= LIMIT          # never oversold, by the independent tracker
    assert max_overlap(spans) == LIMIT          # ... and the limit was actually reached
    # The killed holders' slots came back while the storm still ran:
    assert max_overlap(spans, since=last_kill + TIMEOUT + 0.1) == LIMIT

    assert ghosts, "no holder was killed mid-hold; the test proved nothing"
    leases = [store.acquire() for _ in range(LIMIT)]  # reaps whatever is left, then fills up
    assert all(leases)
    reaped = _mp_total(worker_env["PROMETHEUS_MULTIPROC_DIR"], "corevo_lease_reaped_total")
    reaped += registry.get_sample_value(
        "corevo_lease_reaped_total", {"worker": "audit", "quota": "storm"}) or 0
    assert reaped == len(ghosts)
    granted = _mp_total(worker_env["PROMETHEUS_MULTIPROC_DIR"], "corevo_lease_acquire_total",
                       outcome="granted")
    assert granted >= len(spans)
    store.close()
    print(f"storm: {len(spans)} holds, {len(killed_at)} kills, {len(ghosts)} ghosts reaped")


def test_max_overlap_counts_what_it_should():
    assert max_overlap([(0, 2), (1, 3), (2.5, 4)]) == 2
    assert max_overlap([(0, 1), (0.5, 2), (0.6, 0.7)]) == 3
    assert max_overlap([(0, 1), (5, 6)], since=4) == 1
