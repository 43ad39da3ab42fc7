"""The alert matrix's fleet: two services and their backends, real servers only.

- **web**: ``tests/helpers/matrix_web.py`` under gunicorn (UvicornWorker workers, the
  corevo hooks, ``--timeout 20``); Prometheus scrapes the master's aggregate, job "web".
- **pool**: two ``tests/helpers/matrix_pool.py`` processes (``j0``, ``j1``), each its own
  target, job "pool"; jobs in PostgreSQL, leases of one small Redis quota.
- the shared PostgreSQL of .ci/services.sh (stopped and started with ``pg_ctl`` on cue),
  a private redis-server (killed and restarted on its port on cue), Prometheus (1 s
  scrape and evaluation) on the scaled shipped rules, Alertmanager on the scaled example
  config whose webhooks point at the test's recording receiver.

Every scrape goes through a ``Gate``, a TCP proxy the test can make refuse connections:
a scrape gap or a scrape target down, without touching the process behind it.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import select
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .receiver import Receiver
from .timescale import (
    longest_window,
    redirect_webhooks,
    rule_span,
    rules_by_name,
    scale_alertmanager,
    scale_rules,
)

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS = "/usr/bin/prometheus"
ALERTMANAGER = "/usr/bin/prometheus-alertmanager"
QUOTA = "matrix_llm"
LIMIT = 2
LEASE_TIMEOUT = 5.0
WEB_WORKERS = 2
GUNICORN_TIMEOUT = 20
INTERVAL = 1.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, check: Any, timeout: float, step: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            got = check()
            if got:
                return got
        time.sleep(step)
    raise AssertionError(f"{what}: not within {timeout:.0f} s")


def http(url: str, *, method: str = "GET", timeout: float = 5.0) -> Any:
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(req, timeout=timeout) as reply:
        return json.loads(reply.read() or b"null")


class Gate:
    """A TCP proxy in front of one scrape target; ``refuse(seconds)`` closes its port
    (and every open connection: Prometheus keeps them alive) for that long."""

    def __init__(self, target: int) -> None:
        self.target, self.port = target, free_port()
        self._lock = threading.Lock()
        self._listener: socket.socket | None = None
        self._conns: set[socket.socket] = set()
        self._closed = False
        self._refused_until = 0.0
        threading.Thread(target=self._accept, daemon=True).start()

    def _listen(self) -> socket.socket:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(16)
        s.settimeout(0.1)
        return s

    def _accept(self) -> None:
        while not self._closed:
            with self._lock:
                if self._listener is None and time.monotonic() >= self._refused_until:
                    self._listener = self._listen()
                listener = self._listener
            if listener is None:
                time.sleep(0.05)
                continue
            try:
                conn, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._pipe, args=(conn,), daemon=True).start()

    def _pipe(self, conn: socket.socket) -> None:
        try:
            up = socket.create_connection(("127.0.0.1", self.target), timeout=5)
        except OSError:
            conn.close()
            return
        with self._lock:
            self._conns.update((conn, up))
        try:
            while True:
                ready, _, _ = select.select([conn, up], [], [], 1.0)
                for src in ready:
                    data = src.recv(65536)
                    if not data:
                        return
                    (up if src is conn else conn).sendall(data)
        except OSError:
            return
        finally:
            with self._lock:
                self._conns.difference_update((conn, up))
            conn.close()
            up.close()

    def refuse(self, seconds: float) -> None:
        """Refuse connections from now for ``seconds`` (returns at once)."""
        with self._lock:
            self._refused_until = time.monotonic() + seconds
            if self._listener is not None:
                self._listener.close()
                self._listener = None
            for c in self._conns:
                with contextlib.suppress(OSError):
                    c.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._closed = True
        self.refuse(0)


class Redis:
    """A private redis-server that can go down and come back on the same port (empty,
    as a crashed server with no persistence would: no lease survives the outage)."""

    def __init__(self, tmp: Path) -> None:
        self.port, self.dir = free_port(), tmp
        self.proc: subprocess.Popen[bytes] | None = None
        self.up()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def up(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for("redis up", self._answers, 20)

    def _answers(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), 1):
            return True

    def down(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None


class Postgres:
    """The shared server of .ci/services.sh, stopped and started with ``pg_ctl`` (as the
    ``postgres`` user under root), with the options it was started with."""

    def __init__(self) -> None:
        self.data = Path(os.environ["COREVO_PGDATA"])
        opts = shlex.split((self.data / "postmaster.opts").read_text())
        self.bindir = Path(opts[0]).parent
        skip = {"-D": 2}
        rest, i = [], 1
        while i < len(opts):  # the options after the binary, minus the data dir
            if opts[i] in skip:
                i += skip[opts[i]]
                continue
            rest.append(opts[i])
            i += 1
        self.options = shlex.join(rest)
        self.as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _ctl(self, *args: str) -> None:
        subprocess.run([*self.as_pg, str(self.bindir / "pg_ctl"), "-D", str(self.data), *args],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=60)

    def down(self) -> None:
        self._ctl("-m", "fast", "-w", "stop")

    def up(self) -> None:
        self._ctl("-l", str(self.data / "server.log"), "-w", "-o", self.options, "start")


class Load(threading.Thread):
    """Light steady load: an item every 0.2 s, a pool job (0.2 s of work) every 0.5 s."""

    def __init__(self, app: str) -> None:
        super().__init__(daemon=True)
        self.app, self.done, self.errors = app, 0, 0
        self.stop = threading.Event()

    def run(self) -> None:
        rng, tick = random.Random(7), 0
        while not self.stop.wait(0.2):
            tick += 1
            try:
                http(f"{self.app}/items/{rng.randrange(1000)}")
                if tick % 3 == 0:
                    http(f"{self.app}/jobs?work=0.2", method="POST")
                self.done += 1
            except (OSError, urllib.error.HTTPError):
                self.errors += 1


@dataclass
class Fleet:
    tmp: Path
    receiver: Receiver
    redis: Redis
    pg: Postgres
    dsn: str
    app: str
    prom: str
    am: str
    master: subprocess.Popen[bytes]
    pool: dict[str, subprocess.Popen[bytes]]
    control: dict[str, int]
    gates: dict[str, Gate]
    #: the rule file as Prometheus loaded it (scaled)
    rules: dict[str, Any]
    load: Load | None = None
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def longest_window(self) -> float:
        return longest_window(self.rules)

    def span(self, alert: str) -> float:
        """Seconds (scaled) a fault must last for ``alert``'s window and ``for:``."""
        return rule_span(rules_by_name(self.rules)[alert])

    def queued(self) -> int:
        """Jobs no worker has claimed yet."""
        import psycopg

        with psycopg.connect(self.dsn, connect_timeout=5) as conn:
            row = conn.execute("SELECT count(*) FROM corevo_matrix_jobs WHERE owner IS NULL "
                               "AND state = 'queued'").fetchone()
        return int(row[0]) if row else 0

    def instance(self, target: str) -> str:
        return f"127.0.0.1:{self.gates[target].port}"

    def pool_command(self, worker: str, command: str) -> dict[str, Any]:
        with socket.create_connection(("127.0.0.1", self.control[worker]), 10) as s:
            s.sendall(command.encode() + b"\n")
            return dict(json.loads(s.makefile().readline()))

    def hit_worker(self, path: str, worker: str, *, timeout: float = 5.0,
                   tries: int = 400) -> bool:
        """GET ``path?worker=`` until the named web worker takes it; True once it did
        (its reply says so, or it did not answer within ``timeout``: frozen)."""
        for _ in range(tries):
            sep = "&" if "?" in path else "?"
            try:
                if http(f"{self.app}{path}{sep}worker={worker}", timeout=timeout)["hit"]:
                    return True
            except TimeoutError:
                return True
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, TimeoutError):
                    return True
        return False

    def prom_alerts(self) -> list[dict[str, Any]]:
        return list(http(f"{self.prom}/api/v1/alerts")["data"]["alerts"])

    def am_alerts(self) -> list[dict[str, Any]]:
        return list(http(f"{self.am}/api/v2/alerts"))

    def query(self, expr: str) -> list[dict[str, Any]]:
        import urllib.parse
        q = urllib.parse.urlencode({"query": expr})
        return list(http(f"{self.prom}/api/v1/query?{q}")["data"]["result"])


def _rule_file(rules_dir: Path) -> Path:
    return rules_dir / "corevo.rules.yml"


def _write_prometheus(tmp: Path, rules: Path, am_port: int, web: list[str],
                      pool: list[str]) -> Path:
    config = {
        "global": {"scrape_interval": f"{INTERVAL:g}s", "scrape_timeout": f"{INTERVAL:g}s",
                   "evaluation_interval": f"{INTERVAL:g}s"},
        "rule_files": [str(rules)],
        "alerting": {"alertmanagers": [
            {"static_configs": [{"targets": [f"127.0.0.1:{am_port}"]}]}]},
        "scrape_configs": [
            {"job_name": "web", "static_configs": [{"targets": web}]},
            {"job_name": "pool", "static_configs": [{"targets": pool}]}],
    }
    path = tmp / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@contextlib.contextmanager
def _proc(cmd: list[str], log: Path, env: dict[str, str] | None = None,
          cwd: Path = ROOT) -> Iterator[subprocess.Popen[bytes]]:
    out = open(log, "wb")  # noqa: SIM115 - closed below, after the process
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        out.close()


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


@contextlib.contextmanager
def fleet(tmp: Path, dsn: str, rules_dir: Path, factor: float) -> Iterator[Fleet]:
    """Everything up and scraped, the load running; torn down in reverse order."""
    rules_doc = yaml.safe_load(_rule_file(rules_dir).read_text())
    scaled = scale_rules(rules_doc, factor)
    rules = tmp / "corevo.rules.yml"
    rules.write_text(yaml.safe_dump(scaled, sort_keys=False, width=1000))
    env = dict(os.environ)
    # this checkout first-come unless PYTHONPATH names another corevo_obs to test
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(ROOT)) if p)
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    env.pop("COREVO_WORKER", None)
    pg = Postgres()
    with contextlib.ExitStack() as stack:
        redis = Redis(tmp)
        stack.callback(redis.down)
        receiver = stack.enter_context(Receiver())
        am_doc = yaml.safe_load((rules_dir / "alertmanager.example.yml").read_text())
        am_doc = redirect_webhooks(scale_alertmanager(am_doc, factor), receiver.base)
        (tmp / "alertmanager.yml").write_text(yaml.safe_dump(am_doc, sort_keys=False))
        am_port, prom_port = free_port(), free_port()

        mp = tmp / "mp"
        mp.mkdir()
        app_port, metrics_port = free_port(), free_port()
        web_env = {**env, "PROMETHEUS_MULTIPROC_DIR": str(mp), "BIND": f"127.0.0.1:{app_port}",
                   "WORKERS": str(WEB_WORKERS), "COREVO_METRICS_PORT": str(metrics_port),
                   "MATRIX_PG_DSN": dsn}
        # run from tmp: `python -m` puts its working directory first on sys.path, and
        # the app must import corevo_obs from $PYTHONPATH like every other process here
        master = stack.enter_context(_proc(
            [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "examples" / "gunicorn_conf.py"),
             "--timeout", str(GUNICORN_TIMEOUT), "tests.helpers.matrix_web:app"],
            tmp / "web.log", web_env, cwd=tmp))
        pool: dict[str, subprocess.Popen[bytes]] = {}
        control: dict[str, int] = {}
        pool_metrics: dict[str, int] = {}
        for name in ("j0", "j1"):
            control[name], pool_metrics[name] = free_port(), free_port()
            pool[name] = stack.enter_context(_proc(
                [sys.executable, str(Path(__file__).parent / "matrix_pool.py")],
                tmp / f"pool-{name}.log",
                {**env, "COREVO_WORKER": name, "MATRIX_PG_DSN": dsn,
                 "MATRIX_REDIS_URL": redis.url, "MATRIX_QUOTA": QUOTA,
                 "MATRIX_LIMIT": str(LIMIT), "MATRIX_LEASE_TIMEOUT": str(LEASE_TIMEOUT),
                 "MATRIX_CONTROL_PORT": str(control[name]),
                 "MATRIX_METRICS_PORT": str(pool_metrics[name])}))
        gates = {"web": Gate(metrics_port), **{n: Gate(p) for n, p in pool_metrics.items()}}
        for g in gates.values():
            stack.callback(g.close)
        prom_cfg = _write_prometheus(
            tmp, rules, am_port, [f"127.0.0.1:{gates['web'].port}"],
            [f"127.0.0.1:{gates[n].port}" for n in ("j0", "j1")])
        for name, proc in pool.items():
            log = tmp / f"pool-{name}.log"
            wait_for(f"pool {name} ready", lambda p=proc, lg=log:  # type: ignore[misc]
                     "ready" in lg.read_text() or p.poll() is not None, 60)
            assert proc.poll() is None, f"pool {name} exited: {log.read_text()[-2000:]}"

        app = f"http://127.0.0.1:{app_port}"
        wait_for("web app up", lambda: http(f"{app}/items/1"), 60)
        wait_for("web metrics up", lambda: _ready(f"http://127.0.0.1:{metrics_port}/metrics"), 60)
        # Prometheus starts once every target answers: a target not up yet is down
        stack.enter_context(_proc(
            [ALERTMANAGER, f"--config.file={tmp / 'alertmanager.yml'}",
             f"--storage.path={tmp / 'am'}", f"--web.listen-address=127.0.0.1:{am_port}",
             "--cluster.listen-address=", "--log.level=warn"], tmp / "alertmanager.log"))
        stack.enter_context(_proc(
            [PROMETHEUS, f"--config.file={prom_cfg}", f"--storage.tsdb.path={tmp / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
            tmp / "prometheus.log"))
        f = Fleet(tmp, receiver, redis, pg, dsn, app,
                  f"http://127.0.0.1:{prom_port}", f"http://127.0.0.1:{am_port}", master,
                  pool, control, gates, scaled)
        wait_for("alertmanager ready", lambda: _ready(f"{f.am}/-/ready"), 60)
        wait_for("prometheus ready", lambda: _ready(f"{f.prom}/-/ready"), 60)
        # every worker of both services scraped with its loop health
        wait_for("every worker scraped", lambda: len(f.query(
            "corevo_event_loop_heartbeat_timestamp_seconds")) >= WEB_WORKERS + 2, 90)
        f.load = Load(f.app)
        f.load.start()
        stack.callback(f.load.stop.set)
        yield f


def logs(tmp: Path) -> str:
    """The tail of every server log, for a failure message."""
    out = []
    for log in sorted(tmp.glob("*.log")):
        out.append(f"--- {log.name}\n{log.read_text(errors='replace')[-1500:]}")
    return "\n".join(out)


def postgres_controllable() -> bool:
    data = os.environ.get("COREVO_PGDATA")
    if not data or not Path(data, "postmaster.opts").exists():
        return False
    return os.geteuid() != 0 or shutil.which("runuser") is not None


