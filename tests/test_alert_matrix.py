"""The alert matrix on real servers: every shipped rule's fault, one at a time, through
Prometheus and Alertmanager to a recording webhook receiver (issue 34).

The fleet (tests/helpers/fleet.py): a FastAPI service under gunicorn (UvicornWorker,
``--timeout 20``) and a separate pool of two plain asyncio job workers (PostgreSQL job
store, Redis leases of a 2-slot quota), each service its own Prometheus ``job``; the
shipped rules and the shipped Alertmanager example, their durations divided by one
factor (tests/helpers/timescale.py, ``COREVO_MATRIX_FACTOR``, default 20), the example's
webhooks pointed at the receiver. Then:

1. a healthy baseline under light load (10 minutes, scaled) delivers nothing;
2. each fault delivers its own alert(s) for the right job / worker / quota, and nothing
   else (an ``allowed`` alert is a true consequence of the same fault that may or may
   not win the race, e.g. ``CorevoLoopFrozen`` before gunicorn kills the worker); one
   page per outage: Redis down pages ``CorevoLeaseBackendDown`` for each pool worker
   while the breaker's own warning is held back by Alertmanager's inhibition (the table
   says so), PostgreSQL down pages ``CorevoClaimsDbDown`` for each worker of both
   services, and fills no quota (the pool gives a lease back when the database does not
   answer its start);
3. scrape gaps (every endpoint refusing for 30 s, scaled, twice) deliver nothing;
4. quiet past the longest rule window: no alert fires again (an alert that pages a
   second time for the same labels is a new episode, and fails the test), and every
   alert that fired has been resolved.

The fault × alerts delivered × time to deliver table is printed (``-s``) and kept in
docs/dashboards.md. ``COREVO_MATRIX_RULES_DIR`` reads the rules and Alertmanager config
from another directory (default: this checkout's alerts/).
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .conftest import _need
from .helpers.fleet import (
    ALERTMANAGER,
    GUNICORN_TIMEOUT,
    LEASE_TIMEOUT,
    LIMIT,
    PROMETHEUS,
    QUOTA,
    ROOT,
    Fleet,
    fleet,
    http,
    logs,
    postgres_controllable,
    wait_for,
)
from .helpers.receiver import Delivery

pytestmark = pytest.mark.system  # ~6.5 min: docs/dashboards.md, "Alert matrix"

FACTOR = float(os.environ.get("COREVO_MATRIX_FACTOR", "20"))
RULES_DIR = Path(os.environ.get("COREVO_MATRIX_RULES_DIR", ROOT / "alerts"))
#: a production healthy baseline and scrape gap, before scaling
BASELINE = 600.0
GAP = 30.0
#: bound on any one wait for a delivery (the slowest: saturation's window plus its for)
DELIVER_WITHIN = 120.0


@dataclass(frozen=True)
class Want:
    """An alert by name and the labels that say which job / worker / quota it is about."""

    name: str
    labels: tuple[tuple[str, str], ...] = ()

    def matches(self, d: Delivery) -> bool:
        return d.name == self.name and all(d.labels.get(k) == v for k, v in self.labels)

    def __str__(self) -> str:
        return f"{self.name}{{{','.join(f'{k}={v}' for k, v in self.labels)}}}"


def want(name: str, **labels: str) -> Want:
    return Want(name, tuple(sorted(labels.items())))


@dataclass
class Phase:
    name: str
    expected: list[Want]
    allowed: list[Want] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    ended: float = float("inf")
    #: first firing delivery of each new episode that arrived during the phase
    delivered: list[Delivery] = field(default_factory=list)
    #: what a fault's own check found wrong in what was delivered
    notes: list[str] = field(default_factory=list)
    #: alerts that fired in Prometheus and Alertmanager held back (for the table)
    held: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        out = [f"{self.name}: {note}" for note in self.notes]
        out += [f"{self.name}: {w} not delivered" for w in self.expected
               if not any(w.matches(d) for d in self.delivered)]
        out += [f"{self.name}: unexpected {d.describe()}" for d in self.delivered
                if not any(w.matches(d) for w in self.expected + self.allowed)]
        return out

    def row(self) -> str:
        got = ", ".join(f"{d.describe()} {d.at - self.started:.1f}s"
                        for d in self.delivered) or "nothing"
        if self.held:
            got += f"; held back: {', '.join(self.held)}"
        return f"| {self.name} | {got} |"


class Matrix:
    """Phases in order; each new firing episode belongs to the phase it arrived in."""

    def __init__(self, f: Fleet) -> None:
        self.f = f
        self.phases: list[Phase] = []

    def begin(self, name: str, expected: list[Want], allowed: list[Want] | None = None,
              ) -> Phase:
        now = time.monotonic()
        if self.phases:
            self.phases[-1].ended = now
        phase = Phase(name, expected, allowed or [], now)
        self.phases.append(phase)
        return phase

    def attribute(self) -> None:
        for phase in self.phases:
            phase.delivered = sorted(
                (d for d in self.f.receiver.episodes().values()
                 if phase.started <= d.at < phase.ended), key=lambda d: d.at)

    def delivered(self, phase: Phase, timeout: float = DELIVER_WITHIN) -> bool:
        """Wait (bounded) until every alert ``phase`` expects has been delivered firing."""
        def done(seen: list[Delivery]) -> bool:
            fresh = [d for d in seen if d.status == "firing" and d.at >= phase.started]
            return all(any(w.matches(d) for d in fresh) for w in phase.expected)

        return self.f.receiver.wait(done, timeout)

    def fault(self, name: str, expected: list[Want], start: Callable[[], object],
              end: Callable[[], object] | None = None, allowed: list[Want] | None = None,
              check: Callable[[Phase], None] | None = None) -> Phase:
        """One fault's phase: ``start`` it, wait (bounded) until its alerts were delivered,
        ``check`` it while it lasts, ``end`` it (also when the wait failed), then let what
        it set off arrive."""
        phase = self.begin(name, expected, allowed)
        try:
            start()
            self.delivered(phase)
            if check is not None:
                check(phase)
        finally:
            if end is not None:
                end()
        self.settle()
        return phase

    def settle(self, timeout: float = 30.0) -> None:
        """Wait (bounded) until nothing is pending in Prometheus and every alert active
        in Alertmanager has reached the receiver: what a fault set off has arrived."""
        deadline = time.monotonic() + timeout
        quiet_since: float | None = None
        while time.monotonic() < deadline:
            try:
                pending = [a for a in self.f.prom_alerts() if a["state"] == "pending"]
                episodes = self.f.receiver.episodes()
                undelivered = [a for a in self.f.am_alerts()
                               if a["status"]["state"] == "active"
                               and (a["fingerprint"], a["startsAt"]) not in episodes]
            except (OSError, KeyError):
                pending, undelivered = [None], []  # type: ignore[list-item]
            if pending or undelivered:
                quiet_since = None
            elif quiet_since is None:
                quiet_since = time.monotonic()
            elif time.monotonic() - quiet_since >= 3.0:
                return
            time.sleep(0.5)


def _scaled(seconds: float) -> float:
    return seconds / FACTOR


# --- the faults ------------------------------------------------------------------------

def stalls(f: Fleet) -> None:
    """Four 0.5 s blocking calls on web worker w1 (the rule wants 3 in its window)."""
    for _ in range(4):
        assert f.hit_worker("/fault/stall?seconds=0.5", "w1"), "w1 never took a request"


def freeze(f: Fleet) -> threading.Thread:
    """A 45 s blocking call on web worker w0: gunicorn (--timeout 20) kills it first."""
    hit = threading.Event()

    def go() -> None:
        if f.hit_worker("/fault/freeze?seconds=45", "w0", timeout=3.0):
            hit.set()

    t = threading.Thread(target=go, daemon=True)
    t.start()
    assert hit.wait(60) or t.is_alive(), "w0 never took the freeze"
    return t


def ghost(f: Fleet) -> None:
    """A holder that takes a slot of the pool's quota and dies without releasing it."""
    from prometheus_client import CollectorRegistry

    from corevo_obs.leases import RedisLeaseStore

    store = RedisLeaseStore(QUOTA, f.redis.url, limit=LIMIT, timeout=LEASE_TIMEOUT,
                            socket_timeout=0.5, connect_timeout=0.5,
                            registry=CollectorRegistry(), worker="ghost")
    assert store.acquire(wait=30) is not None  # never renewed, never released
    store.close()


def fence(f: Fleet) -> None:
    """Pool worker j1 claims a job and is slow to start it; a janitor requeues the claim
    (``reclaim_prestart``), so j1's start is fenced."""
    from prometheus_client import CollectorRegistry

    from corevo_obs.claims import PostgresJobStore

    claim = f.pool_command("j1", "fence")
    janitor = PostgresJobStore(f.dsn, table="corevo_matrix_jobs", registry=CollectorRegistry(),
                               worker="janitor")
    try:
        assert janitor.reclaim_prestart(owner=claim["owner"]) >= 1, claim
    finally:
        janitor.close()


def saturate(f: Fleet, seconds: float) -> None:
    """Jobs of 1 s each, enough to keep both slots of the quota busy for ``seconds``
    (4 runners contend for 2 slots: a slot is free only between a release and the next
    grant). No job is cancelled: a claimed job cancelled before its start would be a
    fenced start, another alert."""
    for _ in range(int(seconds * LIMIT)):
        http(f"{f.app}/jobs?work=1.0", method="POST")


def burst(f: Fleet, stop: threading.Event) -> None:
    """Requests that need the database, from several clients, until ``stop``: each web
    worker meets the outage more than the rule's three times in its window."""
    while not stop.wait(0.05):
        try:
            http(f"{f.app}/jobs?work=0.05", method="POST", timeout=5)
        except (OSError, urllib.error.HTTPError):
            pass


def humanized_seconds(text: str) -> float:
    """Prometheus' ``humanizeDuration`` ("10.31s", "1m 5s") back to seconds."""
    units = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
    parts = re.findall(r"(\d+(?:\.\d+)?)([dhms])\b", text)
    if not parts:
        raise ValueError(f"not a duration: {text!r}")
    return sum(float(n) * units[u] for n, u in parts)


def kill_names_the_freeze(f: Fleet, phase: Phase) -> None:
    """The kill page carries the frozen line and the stall's age at the kill: gunicorn
    kills no sooner than timeout / 2 = 10 s into the freeze."""
    kills = [d for d in f.receiver.deliveries(phase.started)
             if d.name == "CorevoWorkerTimeoutKilled" and d.status == "firing"]
    if not kills:
        return  # reported as not delivered
    note = kills[0].annotations
    if "matrix_web.py" not in note.get("frozen_line", ""):
        phase.notes.append(f"the kill page does not name the frozen line: {note}")
    try:
        age = humanized_seconds(note.get("stall_age", ""))
    except ValueError:
        phase.notes.append(f"the kill page carries no stall age: {note}")
        return
    if not GUNICORN_TIMEOUT / 2 - 0.5 <= age <= 45:
        phase.notes.append(f"stall age at the kill {age:g} s, not within "
                           f"{GUNICORN_TIMEOUT / 2:g}..45 s: {note}")


def breaker_held_back(f: Fleet, phase: Phase) -> None:
    """While Redis is down the breaker's own warning fires too; record whether
    Alertmanager holds it back under the outage's page (inhibited) for each worker. One
    that is not held back is delivered, and fails the phase as unexpected."""
    def breakers() -> list[dict[str, Any]]:
        return [a for a in f.am_alerts() if a["labels"].get("alertname") == "CorevoBreakerOpen"]

    with contextlib.suppress(AssertionError):  # not firing yet: recorded as not seen
        wait_for("CorevoBreakerOpen in Alertmanager", lambda: len(breakers()) >= 2,
                 _scaled(120.0) + 10.0)
    seen = {a["labels"].get("worker"): a["status"] for a in breakers()}
    for worker in ("j0", "j1"):
        status = seen.get(worker)
        phase.held.append(f"CorevoBreakerOpen {worker} " + (
            "not firing" if status is None else
            "inhibited" if status.get("inhibitedBy") else status.get("state", "?")))


def gap(f: Fleet, seconds: float) -> None:
    for g in f.gates.values():
        g.refuse(seconds)


# --- the matrix ------------------------------------------------------------------------

@pytest.mark.timeout(900)
def test_alert_matrix(tmp_path: Path, pg_dsn: str) -> None:
    for exe in (PROMETHEUS, ALERTMANAGER):
        if not os.access(exe, os.X_OK):
            _need(f"{exe} not installed (apt-get install prometheus prometheus-alertmanager)")
    if not postgres_controllable():
        _need("COREVO_PGDATA not set: the matrix stops and starts the server of "
              ".ci/services.sh")
    started = time.monotonic()
    with fleet(tmp_path, pg_dsn, RULES_DIR, FACTOR) as f:
        m = Matrix(f)
        try:
            run_matrix(f, m)
        finally:
            m.attribute()
            table = "\n".join(p.row() for p in m.phases)
            print(f"\nalert matrix, factor {FACTOR:g}, {time.monotonic() - started:.0f} s"
                  f" (longest rule window {f.longest_window:.0f} s scaled)\n"
                  f"| fault | delivered, time to deliver |\n|---|---|\n{table}")
            (tmp_path / "matrix.md").write_text(table)
        problems = [p for phase in m.phases for p in phase.problems()]
        problems += [f"still firing at the end: {d.describe()}"
                     for d in f.receiver.still_firing()]
        print("\n".join(problems))
        assert not problems, "\n".join(problems) + "\n" + table + "\n" + logs(tmp_path)
        load = f.load
        assert load is not None
        assert load.done > 50, (load.done, load.errors)


def run_matrix(f: Fleet, m: Matrix) -> None:
    web, pool = {"job": "web"}, {"job": "pool"}

    m.begin("healthy baseline under load", [])
    time.sleep(_scaled(BASELINE))  # the baseline is a span of time: nothing may page
    m.settle()

    m.fault("stalls: 4 blocking calls of 0.5 s on web w1",
            [want("CorevoLoopStalls", **web, worker="w1")], lambda: stalls(f))

    p = m.fault("frozen loop: 45 s on web w0, killed by gunicorn (--timeout 20)",
                [want("CorevoWorkerTimeoutKilled", **web, worker="w0")], lambda: freeze(f),
                allowed=[want("CorevoLoopFrozen", **web, worker="w0")])
    kill_names_the_freeze(f, p)

    # one page per worker: CorevoBreakerOpen (warning) is inhibited under it
    m.fault("Redis down", [want("CorevoLeaseBackendDown", **pool, worker="j0", quota=QUOTA),
                           want("CorevoLeaseBackendDown", **pool, worker="j1", quota=QUOTA)],
            f.redis.down, f.redis.up, check=lambda p: breaker_held_back(f, p))

    stop = threading.Event()
    clients = [threading.Thread(target=burst, args=(f, stop), daemon=True) for _ in range(3)]

    def pg_down() -> None:
        f.pg.down()
        for c in clients:
            c.start()

    def pg_up() -> None:
        stop.set()
        f.pg.up()

    # the pool gives its leases back while the database is down: no saturation
    m.fault("PostgreSQL down", [want("CorevoClaimsDbDown", **pool, worker="j0"),
                                want("CorevoClaimsDbDown", **pool, worker="j1"),
                                want("CorevoClaimsDbDown", **web, worker="w0"),
                                want("CorevoClaimsDbDown", **web, worker="w1")],
            pg_down, pg_up)

    m.fault("sustained lease saturation, with a dip at every release",
            [want("CorevoLeaseSaturated", **pool, quota=QUOTA)],
            lambda: saturate(f, f.span("CorevoLeaseSaturated") + 10.0),
            lambda: wait_for("the backlog drained", lambda: f.queued() == 0, DELIVER_WITHIN))

    m.fault("ghost lease reaped: a holder died without releasing",
            [want("CorevoGhostLeasesReaped", **pool, quota=QUOTA)], lambda: ghost(f))

    m.fault("lease heartbeat lost: pool j0 blocks its loop past the lease timeout",
            [want("CorevoLeaseHeartbeatLost", **pool, worker="j0", quota=QUOTA)],
            # < 10 s: not frozen
            lambda: f.pool_command("j0", f"heartbeat_lost {LEASE_TIMEOUT * 1.7:g}"),
            allowed=[want("CorevoGhostLeasesReaped", **pool, quota=QUOTA)])

    m.fault("fenced start: pool j1's claim requeued before it started",
            [want("CorevoFencedStarts", **pool, worker="j1")], lambda: fence(f))

    m.fault("scrape target down: pool j1's endpoint refusing",
            [want("CorevoScrapeDown", **pool, instance=f.instance("j1"))],
            lambda: f.gates["j1"].refuse(DELIVER_WITHIN), lambda: f.gates["j1"].refuse(0))

    m.begin(f"scrape gaps: every endpoint refusing for {GAP:g} s (scaled), twice", [])
    for _ in range(2):
        gap(f, _scaled(GAP))
        time.sleep(_scaled(GAP))
        m.settle()

    m.begin("quiet past the longest rule window", [])
    time.sleep(f.longest_window + 10.0)  # a span of time again: nothing may fire in it
    m.settle()
