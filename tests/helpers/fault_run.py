"""Run a fault schedule (fault_plan.py) against a running workload; gather what happened.

The workload: ``workers`` app worker processes (fault_worker.py: loss-aware lease
holders on a Redis quota, claim lanes on a PostgreSQL job table, metrics in a
multiprocess directory), one producer (fault_producer.py: creates and cancels jobs, runs
the recovery pass) and one scraper with its janitor (mp_scraper.py: checks that no
counter goes backwards between scrapes). The servers are private: a redis-server
without persistence (``RedisProcess``) and an initdb'd PostgreSQL (``PgCluster``); the
metrics directory sits on a small tmpfs of its own when mounting is allowed (root).

The nemesis applies each fault at its time and undoes it at its end, recording when it
really did; a supervisor respawns killed workers (a new ``worker`` label per
incarnation). After the schedule the queue drains, everything stops in order, and
``Outcome`` carries the raw records for fault_checks.py — nothing here judges.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import redis
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from redis.backoff import NoBackoff
from redis.retry import Retry

from corevo_obs.mpdir import LockedMultiProcessCollector
from tests.conftest import HELPERS, free_port, helper_cmd
from tests.helpers.fault_plan import Fault
from tests.helpers.lease_kit import store_for
from tests.helpers.pg_cluster import running_cluster
from tests.test_fault_leases import RedisProcess
from tests.test_integrations_servers import _children

ROOT = HELPERS.parent.parent
RESPAWN_AFTER = 0.3      # a supervisor's restart delay after a worker died
SKEW = 10.0              # clock-ahead clients run this many seconds ahead
REFUSED_RC = 75          # fault_worker.py: enable_multiprocess refused a full disk
#: the save rules of Debian's /etc/redis/redis.conf (Redis' own default)
PACKAGED_SAVE = "3600 1 300 100 60 10000"
SNAPSHOT_EVERY = (1.0, 6.0)   # seconds between the nemesis' BGSAVEs, uniform
BOOT_WAIT = 30.0   # disk-full-start keeps the disk full at most this long past its end
ROOM_BETWEEN = 3.0  # seconds of room at least between two disk faults


@dataclass
class Settings:
    seconds: float
    seed: int
    workers: int = 3
    holders: int = 4
    lanes: int = 2
    limit: int = 3
    timeout: float = 3.0
    interval: float = 0.5
    margin: float = 0.6
    rate: float = 20.0          # jobs created a second
    p_cancel: float = 0.05
    work: tuple[float, float] = (0.01, 0.06)    # a job's side effect, seconds
    disk_mib: int = 24
    gunicorn: bool = False      # the workers under a gunicorn master (it restarts them)
    #: redis.conf ``save`` rules ("": no persistence, every restart empty); with rules the
    #: nemesis also snapshots every few seconds (BGSAVE), so kills land between snapshots
    redis_save: str = ""


@dataclass
class Applied:
    """A fault as the nemesis really applied it (monotonic seconds)."""
    fault: Fault
    began: float
    ended: float = 0.0
    note: str = ""


@dataclass
class Incarnation:
    label: str
    slot: str
    skew: float
    track: Path
    jobs: Path
    log: Path
    proc: subprocess.Popen[str] | None   # None: a gunicorn worker (its master's child)
    started: float
    ended: float | None = None
    rc: int | None = None
    killed: float | None = None     # when the nemesis SIGKILLed it
    stats: dict[str, int] = field(default_factory=dict)


@dataclass
class Outcome:
    settings: Settings
    t0: float
    applied: list[Applied]
    incarnations: list[Incarnation]
    restarts: list[float]               # redis-server relaunched empty (the fence starts)
    producer_log: Path
    producer: dict[str, int]
    producer_rc: int | None
    scraper: dict[str, Any]
    scraper_rc: int | None
    jobs: dict[str, tuple[str, str | None, str | None]]   # id -> (state, owner, execution)
    counters: dict[tuple[str, str, str], float]   # (metric, worker, outcome) -> value
    crashes: list[str]                   # servers that died without the nemesis
    drained: bool
    disk: bool
    plain: dict[str, Any] = field(default_factory=dict)   # the plain reader's scrapes
    #: the counters as an unmodified MultiProcessCollector read them at the end
    plain_counters: dict[tuple[str, str, str], float] | None = None
    snapshots: list[float] = field(default_factory=list)  # BGSAVEs the nemesis issued


def _env(metrics: Path, worker: str) -> dict[str, str]:
    """A child's environment: the metrics directory, this checkout and the helpers
    importable, its own worker label."""
    env = dict(os.environ)
    env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(HELPERS)])
    env["COREVO_WORKER"] = worker
    return env


@contextmanager
def _tmpfs(where: Path, mib: int) -> Iterator[bool]:
    """A small tmpfs at ``where`` (True), or a plain directory when mounting is refused."""
    where.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs",
                              str(where)], capture_output=True).returncode == 0
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(disk: Path) -> int:
    """Take every free byte of the tmpfs with a ballast file; the bytes taken."""
    taken = 0
    with open(disk / "ballast", "wb", buffering=0) as f:
        for size in (1 << 16, 1 << 12):
            block = bytes(size)
            try:
                while True:
                    taken += os.write(f.fileno(), block)
            except OSError:
                pass
    return taken


def _ready(jobs: Path) -> bool:
    """Whether the worker writing ``jobs`` said it is at work (``R`` line)."""
    try:
        return any(line.startswith("R ") for line in jobs.read_text().splitlines())
    except OSError:
        return False


def _block_sigusr1() -> None:
    """In the child before exec: SIGUSR1 (stop) stays pending until the worker has its
    handler, so a stop sent early is never a kill."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})


def _counters(metrics: Path, *, plain: bool = False) -> dict[tuple[str, str, str], float]:
    """Every counter sample in the directory, by (metric, worker, outcome|state|path);
    ``plain``: as an unmodified ``MultiProcessCollector`` reads them."""
    reg = CollectorRegistry()
    (MultiProcessCollector if plain else LockedMultiProcessCollector)(reg, path=str(metrics))
    out: dict[tuple[str, str, str], float] = {}
    for family in reg.collect():
        if family.type != "counter":
            continue
        for s in family.samples:
            if s.name.endswith("_total"):
                kind = s.labels.get("outcome") or s.labels.get("state") or \
                    s.labels.get("path") or ""
                key = (s.name, s.labels.get("worker", ""), kind)
                out[key] = out.get(key, 0.0) + s.value
    return out


class Runner:
    """The servers, the workload, the nemesis and the supervisor of one run."""

    def __init__(self, settings: Settings, faults: list[Fault], tmp: Path) -> None:
        self.s, self.faults, self.tmp = settings, faults, tmp
        self.table = "jobs_sched"
        self.quota = "sched"
        self.incarnations: list[Incarnation] = []
        self.slots: dict[str, Incarnation] = {}
        self.respawn: dict[str, float] = {}
        self.generation = 0
        self.hogs: list[subprocess.Popen[bytes]] = []
        self.helpers: list[subprocess.Popen[str]] = []   # the producer and the scraper
        self.master: subprocess.Popen[str] | None = None   # gunicorn mode
        self.gkilled: dict[int, float] = {}                # gunicorn worker pid -> SIGKILL
        self.frozen = False   # redis-server SIGSTOPped: no BGSAVE is sent to it
        self.redis_down = False
        self.restarts: list[float] = []
        self.crashes: list[str] = []
        self.ending = False
        self.snapshots: list[float] = []
        self.booting: dict[int, Callable[[], bool]] = {}   # disk-full-start: booted yet?
        #: disk-full-start faults past their end whose disk stays full until the worker
        #: booted on it is at work: (the fault, booted yet?, when to give up)
        self.holding: list[tuple[Applied, Callable[[], bool], float]] = []
        self.room_since = 0.0   # when the metrics disk last got its room back
        self.snap_rng = random.Random(settings.seed * 7919)
        self.next_snapshot = float("inf")

    # --- processes ----------------------------------------------------------------------
    def _spawn(self, slot: str, skew: float = 0.0, *, start_on_full: bool = False
               ) -> Incarnation:
        self.generation += 1
        label = f"{slot}-{self.generation}"
        base = self.tmp / "records" / label
        cfg = {**self._load(skew), "worker": label, "track": f"{base}.track",
               "jobs": f"{base}.jobs", "seed": self.s.seed * 1000 + self.generation,
               "start_on_full": start_on_full}
        log = Path(f"{base}.log")
        with open(log, "w") as err:
            proc = subprocess.Popen(helper_cmd("fault_worker.py", json.dumps(cfg)),
                                    env=_env(self.metrics, label), stdout=subprocess.PIPE,
                                    stderr=err, text=True, preexec_fn=_block_sigusr1)
        inc = Incarnation(label, slot, skew, Path(f"{base}.track"), Path(f"{base}.jobs"),
                          log, proc, time.monotonic())
        self.incarnations.append(inc)
        self.slots[slot] = inc
        return inc

    def _load(self, skew: float) -> dict[str, Any]:
        """fault_worker.py's config but for the per-process fields (label, files, seed)."""
        return {"redis": self.redis.url, "quota": self.quota, "limit": self.s.limit,
                "timeout": self.s.timeout, "interval": self.s.interval,
                "margin": self.s.margin, "dsn": self.pg.dsn, "table": self.table,
                "holders": self.s.holders, "lanes": self.s.lanes, "skew": skew,
                "work": self.s.work, "short": (0.2, 1.2),
                "long": (self.s.timeout + 0.5, self.s.timeout + 3.0), "p_long": 0.3,
                "wait": 1.0, "poll": 0.05}

    def _gunicorn(self) -> None:
        """The workers under a gunicorn master (fault_gunicorn_conf.py), which restarts
        the ones the nemesis kills."""
        records = self.tmp / "records"
        env = {**_env(self.metrics, "master"), "FAULT_BIND": f"127.0.0.1:{free_port()}",
               "FAULT_WORKERS": str(self.s.workers), "COREVO_METRICS_PORT": str(free_port()),
               "COREVO_COMPACT_EVERY": "1",
               "FAULT_CFG": json.dumps({**self._load(0.0), "records": str(records),
                                        "seed": self.s.seed})}
        with open(records / "gunicorn.log", "w") as log:
            self.master = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "-c", str(HELPERS / "fault_gunicorn_conf.py"),
                 "fault_gunicorn_conf:app"], env=env, stdout=log, stderr=log, text=True)

    def _stop_gunicorn(self) -> None:
        """A graceful stop; then one incarnation per worker that wrote records, its exit
        status read from the master's log (the master reaped it)."""
        assert self.master is not None
        self.master.send_signal(signal.SIGTERM)
        try:
            rc = self.master.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.master.kill()
            rc = self.master.wait()
        if rc != 0:
            self.crashes.append(f"gunicorn master exited rc {rc}")
        records = self.tmp / "records"
        said = (records / "gunicorn.log").read_text(errors="replace")
        status: dict[int, int] = {}
        for pid, sig in re.findall(r"Worker \(pid:(\d+)\) was sent (\w+)", said):
            status[int(pid)] = -getattr(signal, sig, signal.SIGABRT).value
        for pid, code in re.findall(r"Worker \(pid:(\d+)\) exited with code (\d+)", said):
            status[int(pid)] = int(code)
        for jobs in sorted(records.glob("g*.jobs")):
            pid = int(jobs.stem[1:])
            ready = [float(x.split()[1]) for x in jobs.read_text().splitlines()
                     if x.startswith("R ")]
            self.incarnations.append(Incarnation(
                jobs.stem, "g", 0.0, jobs.with_suffix(".track"), jobs,
                records / "gunicorn.log", None, ready[0] if ready else 0.0,
                self.gkilled.get(pid, time.monotonic()), status.get(pid, 0),
                self.gkilled.get(pid)))

    def _supervise(self) -> None:
        now = time.monotonic()
        for inc in self.incarnations:
            if inc.proc is not None and inc.ended is None and inc.proc.poll() is not None:
                inc.ended, inc.rc = now, inc.proc.returncode
                if inc.slot.startswith("w") and self.slots.get(inc.slot) is inc \
                        and not self.ending:
                    self.respawn[inc.slot] = now + RESPAWN_AFTER
        for slot, at in list(self.respawn.items()):
            if at <= now:
                del self.respawn[slot]
                self._spawn(slot)
        if self.master is not None and self.master.poll() is not None \
                and "gunicorn" not in " ".join(self.crashes):
            self.crashes.append(f"gunicorn master exited rc {self.master.returncode}")
        if now >= self.next_snapshot:
            self._snapshot(now)
        for held in list(self.holding):
            a, booted, give_up = held
            if booted() or now > give_up:
                self.holding.remove(held)
                a.note += (", at work on the full disk" if booted() else
                           f", not at work within {BOOT_WAIT:g} s")
                self._room_back(a)
        if not self.redis_down and self.redis.proc is not None \
                and self.redis.proc.poll() is not None:
            self.crashes.append(f"redis-server exited rc {self.redis.proc.returncode} "
                                "without the nemesis")
            self.redis.start()

    def _snapshot(self, now: float) -> None:
        """A BGSAVE (with persistence): the kills that follow land between snapshots.

        Never to a stopped server, and one try: redis-py's default retries (10, with
        backoff) held the nemesis 7 s on a SIGSTOPped one, which delayed every fault
        behind it (a 4.4 s stop lasted 16 s and ended as the schedule did)."""
        self.next_snapshot = now + self.snap_rng.uniform(*SNAPSHOT_EVERY)
        if self.redis_down or self.frozen:
            return
        client = redis.Redis(port=self.redis.port, socket_timeout=0.3, socket_connect_timeout=0.3,
                             retry=Retry(NoBackoff(), 0))
        try:
            client.bgsave()
            self.snapshots.append(now)
        except redis.RedisError:
            pass  # stopped (SIGSTOP) or already saving: the next one
        finally:
            client.close()

    def _kill_gunicorn_worker(self, target: int, a: Applied) -> None:
        """SIGKILL one of the master's workers (it boots a replacement)."""
        assert self.master is not None
        for _ in range(3):   # a child listed may be reaped (one killed before) by now
            children = sorted(p for p in _children(self.master.pid) if p not in self.gkilled)
            if not children:
                break
            victim = children[target % len(children)]
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                continue
            self.gkilled[victim] = time.monotonic()
            a.note = f"g{victim}"
            return
        a.note = "no worker"

    def _room_first(self) -> None:
        """Room for ``ROOM_BETWEEN`` s before the disk fills again (a boot wait may have
        pushed the last fault's end past this one's start): held values get written."""
        while self.holding or time.monotonic() < self.room_since + ROOM_BETWEEN:
            self._supervise()
            time.sleep(0.1)

    def _room_back(self, a: Applied) -> None:
        """A disk fault ends: the ballast goes (the disk has room), and a plain worker
        booted on it stops (its exit must write out what it held)."""
        if self.mounted:
            (self.disk / "ballast").unlink()
            self.room_since = time.monotonic()
        if a.fault.kind == "disk-full-start" and self.master is None:
            inc = next(i for i in self.incarnations if i.label == a.note.split()[0])
            if inc.proc is not None:
                inc.proc.send_signal(signal.SIGUSR1)
        a.ended = time.monotonic()

    # --- the nemesis --------------------------------------------------------------------
    def _begin(self, f: Fault, a: Applied) -> None:
        if f.kind == "redis-kill":
            self.redis_down = True
            self.redis.kill()
        elif f.kind == "redis-stop":
            self.redis.signal(signal.SIGSTOP)
            self.frozen = True
        elif f.kind == "pg-stop":
            self.pg.stop("immediate")
        elif f.kind == "worker-kill" and self.master is not None:
            self._kill_gunicorn_worker(f.target, a)
        elif f.kind == "worker-kill":
            inc = self.slots[f"w{f.target}"]
            if inc.proc is not None and inc.proc.poll() is None:
                inc.proc.kill()
                inc.killed = time.monotonic()
                a.note = inc.label
            else:
                a.note = "already dead"
        elif f.kind == "cpu-hog":
            self.hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                         for _ in range(2)]
        elif f.kind == "clock-ahead":
            a.note = self._spawn(f"c{len(self.incarnations)}", skew=SKEW).label
        elif f.kind == "disk-full":   # never on a plain directory: that is the host's disk
            self._room_first()
            a.note = f"{_fill(self.disk)} bytes" if self.mounted else "0 bytes: no tmpfs"
        elif f.kind == "disk-full-start":
            self._room_first()
            filled = f"{_fill(self.disk)} bytes" if self.mounted else "0 bytes: no tmpfs"
            master = self.master
            if master is not None:   # the master boots the replacement on the full disk
                before = set(_children(master.pid))
                self._kill_gunicorn_worker(f.target, a)
                self.booting[id(a)] = lambda: any(
                    _ready(self.tmp / "records" / f"g{pid}.jobs")
                    for pid in set(_children(master.pid)) - before)
            else:   # a worker that goes on without room, as a gunicorn worker does
                inc = self._spawn(f"n{f.target}", start_on_full=True)
                a.note = inc.label
                self.booting[id(a)] = lambda: _ready(inc.jobs)
            a.note += f" started on {filled}"

    def _end(self, f: Fault, a: Applied) -> None:
        if f.kind == "redis-kill":
            self.restarts.append(self.redis.start())
            self.redis_down = False
        elif f.kind == "redis-stop":
            self.redis.signal(signal.SIGCONT)
            self.frozen = False
        elif f.kind == "pg-stop":
            self.pg.start()
        elif f.kind == "cpu-hog":
            for hog in self.hogs:
                hog.kill()
                hog.wait()
        elif f.kind == "clock-ahead":
            inc = next(i for i in self.incarnations if i.label == a.note)
            if inc.proc is not None:
                inc.proc.send_signal(signal.SIGUSR1)
        elif f.kind == "disk-full-start" and self.mounted:
            # a loaded machine boots slowly: the disk stays full until the worker booted
            # on it is at work (its R line: its first metric writes are behind it, up to
            # BOOT_WAIT), which _supervise sees, while the other faults keep their times
            self.holding.append((a, self.booting.pop(id(a)), time.monotonic() + BOOT_WAIT))
            return
        elif f.kind in ("disk-full", "disk-full-start"):
            self._room_back(a)
            return
        a.ended = time.monotonic()

    def _drive(self, t0: float) -> list[Applied]:
        """Apply every fault at its time and undo it at its end; supervise in between."""
        events = sorted([(f.at, 0, i) for i, f in enumerate(self.faults)] +
                        [(f.end, 1, i) for i, f in enumerate(self.faults)
                         if f.kind != "worker-kill"])
        if self.s.redis_save:
            self.next_snapshot = t0 + self.snap_rng.uniform(*SNAPSHOT_EVERY)
        applied: dict[int, Applied] = {}
        for at, phase, i in events:
            while time.monotonic() < t0 + at:
                self._supervise()
                time.sleep(min(0.05, max(0.0, t0 + at - time.monotonic())))
            f = self.faults[i]
            if phase == 0:
                applied[i] = Applied(f, time.monotonic())
                self._begin(f, applied[i])
                if f.kind == "worker-kill":
                    applied[i].ended = applied[i].began
            else:
                self._end(f, applied[i])   # sets ``ended`` (a held disk: once room is back)
        while time.monotonic() < t0 + self.s.seconds or self.holding:
            self._supervise()
            time.sleep(0.05)
        return [applied[i] for i in sorted(applied)]

    def _drain(self, within: float) -> bool:
        """Wait until no job is queued or running (the last claims done)."""
        give_up = time.monotonic() + within
        while time.monotonic() < give_up:
            self._supervise()
            try:
                with psycopg.connect(self.pg.dsn, connect_timeout=2) as db:
                    row = db.execute(f"SELECT count(*) FROM {self.table} WHERE state IN "
                                     "('queued', 'running')").fetchone()
                if row is not None and row[0] == 0:
                    return True
            except psycopg.Error:
                pass
            time.sleep(0.3)
        return False

    # --- one run ------------------------------------------------------------------------
    def run(self) -> Outcome:
        with ExitStack() as stack:
            self.redis = RedisProcess(self.tmp, save=self.s.redis_save)
            self.redis.start()
            stack.callback(self.redis.close)
            store_for(self.redis.url, self.quota, fresh=True, limit=self.s.limit,
                      timeout=self.s.timeout).close()
            self.pg = stack.enter_context(running_cluster())
            self.disk = self.tmp / "disk"
            self.mounted = mounted = stack.enter_context(_tmpfs(self.disk, self.s.disk_mib))
            metrics = self.disk / "metrics"
            metrics.mkdir()
            (self.tmp / "records").mkdir()
            self.metrics = metrics
            stack.callback(self._kill_all)
            return self._run(metrics, mounted)
        raise AssertionError("unreachable")

    def _kill_all(self) -> None:
        procs: list[subprocess.Popen[Any]] = [*(i.proc for i in self.incarnations if i.proc),
                                              *self.hogs, *self.helpers,
                                              *([self.master] if self.master else [])]
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()

    def _run(self, metrics: Path, mounted: bool) -> Outcome:
        s = self.s
        log = self.tmp / "records" / "producer.log"
        producer = subprocess.Popen(
            helper_cmd("fault_producer.py", json.dumps({
                "dsn": self.pg.dsn, "table": self.table, "log": str(log), "rate": s.rate,
                "p_cancel": s.p_cancel, "seed": s.seed, "recover_every": 1.0,
                "stale": 4 * s.timeout})),
            env=_env(metrics, "producer"), stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        scraper = subprocess.Popen(helper_cmd("mp_scraper.py", "--interval", "0.25",
                                              "--janitor", "0.5"),
                                   env=_env(metrics, "scraper"), stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, text=True)
        plain = subprocess.Popen(helper_cmd("mp_scraper.py", "--interval", "0.5",
                                            "--janitor", "0", "--plain"),
                                 env=_env(metrics, "plain"), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        self.helpers = [producer, scraper, plain]
        for p in self.helpers:
            assert p.stdout is not None and p.stdout.readline().strip() in ("ready",
                                                                           '{"ready": true}')
        if s.gunicorn:
            self._gunicorn()
        else:
            for i in range(s.workers):
                self._spawn(f"w{i}")
        t0 = time.monotonic()
        applied = self._drive(t0)
        producer.send_signal(signal.SIGUSR1)     # no more jobs; the queue drains
        drained = self._drain(within=60.0)
        self.ending = True
        if self.master is not None:
            self._stop_gunicorn()
        for inc in self.incarnations:
            if inc.proc is not None and inc.proc.poll() is None:
                inc.proc.send_signal(signal.SIGUSR1)
        for inc in self.incarnations:
            if inc.proc is None:
                continue
            try:
                out, _ = inc.proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                inc.proc.kill()
                out, _ = inc.proc.communicate()
            inc.rc = inc.proc.returncode
            inc.ended = inc.ended or time.monotonic()
            last = out.strip().splitlines()[-1:] if out else []
            if last and last[0].startswith("{"):
                inc.stats = json.loads(last[0])
        tallies, producer_rc = self._finish(producer)
        scraped, scraper_rc = self._finish(scraper)
        plained, plain_rc = self._finish(plain)
        if plain_rc != 0:
            self.crashes.append(f"the plain reader exited rc {plain_rc}")
        with psycopg.connect(self.pg.dsn, connect_timeout=5) as db:
            rows = db.execute(f"SELECT id, state, owner, execution_id FROM {self.table}"
                              ).fetchall()
        return Outcome(s, t0, applied, self.incarnations, self.restarts, log, tallies,
                       producer_rc, scraped, scraper_rc,
                       {r[0]: (r[1], r[2], r[3]) for r in rows}, _counters(metrics),
                       self.crashes + ([] if self.pg.running() else ["postgres not running"]),
                       drained, mounted, plained, _counters(metrics, plain=True),
                       self.snapshots)

    @staticmethod
    def _finish(proc: subprocess.Popen[str]) -> tuple[dict[str, Any], int | None]:
        try:
            out, _ = proc.communicate("stop\n", timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        last = out.strip().splitlines()[-1:] if out else []
        return (json.loads(last[0]) if last and last[0].startswith("{") else {},
                proc.returncode)


def run(settings: Settings, faults: list[Fault], tmp: Path) -> Outcome:
    """One run; its records (track and job files) stay in ``tmp`` for the checkers."""
    return Runner(settings, faults, tmp).run()
