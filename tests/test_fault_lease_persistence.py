"""The persistence × fault table: Redis as it ships, faults at random moments, work judged
by the holders' own intervals.

For each persistence mode (``tests/helpers/redis_persist.py``: none, Debian's RDB save
rules, AOF everysec, AOF always) a primary and a replica with that redis.conf run behind a
proxy; 3 holder processes × 4 loss-aware holders (``store.hold()``, default store options
but short waits and a 1 s timeout) contend for a limit-3 quota, and three cells follow
one another, each at least ``CELL_S`` seconds and 3 faults of one kind, 0.6–2 s apart,
and on (at most 4 × ``CELL_S``) until it has 30 intervals and the limit at work:

- ``sigkill``: SIGKILL the primary and restart it from its own files (with RDB and AOF,
  ``BGSAVE`` forced at random moments before each fault, the last one 0–2 timeouts
  before it, so the kill falls at a random point after a snapshot);
- ``sigstop``: SIGSTOP the primary for 0.3–2 s (often past the lease timeout), SIGCONT;
  the cell's first stop waits for a long hold at work and lasts 1.2–2 s, so it cuts that
  hold whatever the other stops meet (with AOF, or through a failover, no grant is lost,
  and stops at random moments alone once cut none: aof-everysec, seed 250796);
- ``failover``: SIGKILL the primary, promote the replica (``REPLICAOF NO ONE``), move the
  proxy to it (every link cut, as a Sentinel client sees it), restart the old primary
  from its files as the new replica.

Each holder appends its grant → end-of-work times to its process's file; the sweep over
those intervals — never the store's rows — must never exceed the limit, per cell and over
the run; each cell must have reached the limit, and faults must have cut holds. The seed
is printed (``COREVO_LEASE_SEED`` replays it); ``COREVO_LEASE_CELL_S`` lengthens the cells
for the figures in docs/reliability.md.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _need
from tests.helpers.lease_holders import kill_left, start_holders, stop_holders
from tests.helpers.lease_kit import store_for
from tests.helpers.lease_tracker import Span, await_long_hold, max_overlap, read_spans
from tests.helpers.redis_persist import PERSISTENCE, ReplicatedRedis, ServerGone

pytestmark = pytest.mark.system

LIMIT, TIMEOUT, INTERVAL, MARGIN = 3, 1.0, 0.2, 0.25
PROCS, HOLDERS = 3, 4
SHORT, LONG, P_LONG = (0.005, 0.04), (1.2, 2.0), 0.04
WAITS: dict[str, Any] = {"socket_timeout": 0.2, "connect_timeout": 0.1}
CELL_S = float(os.environ.get("COREVO_LEASE_CELL_S", "6"))
MIN_FAULTS = 3
MIN_INTERVALS = 30
EVIDENCE_S = 4 * CELL_S
FAULTS = ("sigkill", "sigstop", "failover")


def _seed() -> int:
    return int(os.environ.get("COREVO_LEASE_SEED") or random.SystemRandom().randrange(10**6))


def _gap(topo: ReplicatedRedis, rng: random.Random, persistent: bool) -> int:
    """0.6–2 s of work before the next fault; with persistence, ``BGSAVE`` at random
    moments in it, the last one 0–2 timeouts before the fault (so a SIGKILL falls at a
    random point after a snapshot: often with grants made since, at work, and the
    snapshot's own holders already expired). The number of snapshots forced."""
    t0, gap = time.monotonic(), rng.uniform(0.6, 2.0)
    last = gap - rng.uniform(0.0, min(gap, 2 * TIMEOUT))
    saves = 0
    if persistent:
        at = rng.uniform(0.0, last)
        while True:
            time.sleep(max(0.0, t0 + min(at, last) - time.monotonic()))
            topo.primary.bgsave()
            saves += 1
            if at >= last:
                break
            at += rng.uniform(0.05, 0.8)
    time.sleep(max(0.0, t0 + gap - time.monotonic()))
    return saves


def _inject(topo: ReplicatedRedis, fault: str, rng: random.Random, tracks: list[Path],
            aimed: bool) -> None:
    """One fault; an ``aimed`` stop waits for a long hold and outlasts its deadline."""
    if fault == "sigkill":
        topo.restart()
    elif fault == "sigstop":
        stop = rng.uniform(TIMEOUT + 0.2, LONG[1]) if aimed else rng.uniform(0.3, 2.0)
        if aimed:
            await_long_hold(tracks, TIMEOUT, within=5.0)
        topo.primary.signal(signal.SIGSTOP)
        time.sleep(stop)
        topo.primary.signal(signal.SIGCONT)
    else:
        topo.promote()


def _holders(url: str, tmp: Path, env: dict[str, str], seed: int
             ) -> tuple[list[subprocess.Popen[str]], list[Path]]:
    return start_holders(env, tmp, PROCS, seed=lambda i: seed * 10 + i, where=url,
                         quota="persist", limit=LIMIT, timeout=TIMEOUT, interval=INTERVAL,
                         margin=MARGIN, waits=WAITS, holders=HOLDERS, short=SHORT, long=LONG,
                         p_long=P_LONG, wait=0.5, poll=0.02, until=time.monotonic() + 600)


def _enough(tracks: list[Path], start: float) -> bool:
    """Whether the cell begun at ``start`` already has the intervals and the full limit
    at work that its assertions ask for."""
    n, most = _cell(read_spans(tracks)[0], start, time.monotonic())
    return n >= MIN_INTERVALS and most == LIMIT


def _cell(spans: list[Span], start: float, end: float) -> tuple[int, int]:
    """Intervals granted in [start, end), and the most at work at once in that window
    (intervals from before that still run count too)."""
    inside = [s for s in spans if start <= s[0] < end]
    around = [s for s in spans if s[0] < end and s[1] >= start]
    return len(inside), max_overlap(around, since=start)


@pytest.mark.parametrize("mode", list(PERSISTENCE))
def test_persistence_by_fault_never_oversells_work(mode: str, tmp_path: Path,
                                                   worker_env: dict[str, str]) -> None:
    seed = _seed()
    rng = random.Random(seed)
    try:
        topo = ReplicatedRedis(tmp_path / "redis", mode)
    except ServerGone as exc:
        _need(str(exc))
    procs: list[subprocess.Popen[str]] = []
    saves = 0
    cells: list[tuple[str, float, float, int]] = []
    try:
        store_for(topo.url, "persist", fresh=True, limit=LIMIT, timeout=TIMEOUT,
                  **WAITS).close()
        procs, tracks = _holders(topo.url, tmp_path, worker_env, seed)
        for fault in FAULTS:
            start, faults = time.monotonic(), 0
            # at least MIN_FAULTS faults and CELL_S seconds, then on until the cell has
            # its evidence (every restart fence pauses grants, so chance can leave a
            # short cell thin), at most EVIDENCE_S; the last fault's recovery (a fence,
            # a relink) inside the cell
            while (faults < MIN_FAULTS or time.monotonic() < start + CELL_S - 1.5
                   or (not _enough(tracks, start)
                       and time.monotonic() < start + EVIDENCE_S - 1.5)):
                # with save "" a BGSAVE would still write a dump for the restart to load
                saves += _gap(topo, rng, mode != "none")
                _inject(topo, fault, rng, tracks, aimed=faults == 0)
                faults += 1
            time.sleep(1.5)
            cells.append((fault, start, time.monotonic(), faults))
        stats = stop_holders(procs)
    finally:
        kill_left(procs)
        topo.close()

    spans, unfinished = read_spans(tracks)
    assert not unfinished, f"holders without an end of work: {unfinished[:3]}"
    print(f"\n{mode} (seed {seed}, {saves} forced BGSAVEs): {len(spans)} intervals, "
          f"holds cut {stats.get('lost_lost', 0)} lost + "
          f"{stats.get('lost_unconfirmed', 0)} unconfirmed")
    print("| persistence | fault | faults | intervals | most at work (limit 3) |")
    worst = {}
    for fault, start, end, faults in cells:
        n, most = _cell(spans, start, end)
        worst[fault] = most
        print(f"| {mode} | {fault} | {faults} | {n} | {most} |")
        assert n >= MIN_INTERVALS, f"{fault}: only {n} intervals, the cell proved little"
    assert max_overlap(spans) <= LIMIT, \
        f"{mode} (seed {seed}): {max_overlap(spans)} at work on limit {LIMIT}: {worst}"
    assert all(m == LIMIT for m in worst.values()), f"the limit was never reached: {worst}"
    assert stats.get("lost_lost", 0) + stats.get("lost_unconfirmed", 0) > 0, \
        "no hold was cut: the faults never reached a holder"
