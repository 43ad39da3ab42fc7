"""The app under test: served by the tool in worker processes, or already running here.

An import path (``pkg.module:app``) is served the way users run it in production:
an ASGI app under ``uvicorn --workers N`` with ``$PROMETHEUS_MULTIPROC_DIR`` set to a
fresh directory and ``corevo-obs metrics serve`` beside it (one endpoint, every worker
once); an aiohttp app (an ``Application`` or a factory returning one) under gunicorn's
aiohttp worker with the suite's hooks. Worker output is kept in ``server.log`` and read
while it is written, for the watchdog's stall lines ("event loop of worker w1 stalled
0.401s at app.py:70:report"), which carry the blocking line the metrics cannot.

A URL must name a loopback host: the tool never sends load anywhere else (``loopback``).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from .loopback import urlopen
from .workload import WorkloadError

_STALL = re.compile(
    r"(?:\[(?P<cause>\w+)\] )?"
    r"event loop of worker (?P<worker>\S+) "
    r"(?:stalled (?P<duration>[0-9.]+)s|(?P<ongoing>STILL STALLED), (?P<so_far>[0-9.]+)s so far,)"
    r" at (?P<where>.+?)"
    r"(?: \((?P<more>\d+) more since the last report\))?\s*$")
_DETECT = r"""
import importlib, inspect, os, sys
sys.path.insert(0, os.getcwd())
mod, _, attr = sys.argv[1].partition(":")
obj = importlib.import_module(mod)
for part in (attr or "app").split("."):
    obj = getattr(obj, part)
kind = "asgi"
try:
    from aiohttp import web
    if isinstance(obj, web.Application):
        kind = "aiohttp"
    elif callable(obj) and not isinstance(obj, type):
        params = [p for p in inspect.signature(obj).parameters.values()
                  if p.default is p.empty
                  and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if not params and not inspect.iscoroutinefunction(obj):
            kind = "aiohttp-factory" if isinstance(obj(), web.Application) else "asgi"
except ImportError:
    pass
print("KIND", kind)
"""


@dataclass(frozen=True)
class StallLine:
    """One stall as the worker logged it; ``cause`` is the headline's ``[cause]`` prefix
    (docs/loop-health.md), None for a line from a corevo-obs without attribution."""

    at: float  # seconds since the run started, when the tool read the line
    worker: str
    duration: float
    file: str | None
    line: int | None
    function: str | None
    suppressed: int = 0
    cause: str | None = None
    ongoing: bool = False  # an in-progress report: the stall had lasted ``duration`` so far

    @property
    def where(self) -> str:
        if self.file is None:
            return "no project frame"
        return f"{_short(self.file)}:{self.line}"

    def as_dict(self) -> dict[str, Any]:
        return {"at_seconds": round(self.at, 3), "worker": self.worker,
                "duration_seconds": self.duration, "file": self.file, "line": self.line,
                "function": self.function, "where": self.where,
                "suppressed_before": self.suppressed, "cause": self.cause,
                "ongoing": self.ongoing}


def parse_stall_line(text: str, at: float) -> StallLine | None:
    m = _STALL.search(text)
    if m is None:
        return None
    where = m["where"]
    file = line = function = None
    parts = where.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit():
        file, line, function = parts[0], int(parts[1]), parts[2]
    return StallLine(at, m["worker"], float(m["duration"] or m["so_far"]), file, line, function,
                     int(m["more"] or 0), m["cause"], ongoing=m["ongoing"] is not None)


def _short(path: str) -> str:
    """A path relative to the working directory when it is under it (as users read it)."""
    with contextlib.suppress(ValueError):
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LogTail:
    """Reads a process's output line by line into a file, picking out stall lines.

    ``follow=True`` tails a log file someone else writes (an app the tool did not start):
    only lines written from now on, polled until :meth:`join`.
    """

    def __init__(self, stream: IO[bytes], path: Path, clock: Callable[[], float], *,
                 follow: bool = False) -> None:
        self.path = path
        self.stalls: list[StallLine] = []
        #: per worker, a stall reported in progress that has not ended (yet)
        self.ongoing: dict[str, StallLine] = {}
        self.tail: list[str] = []
        self._clock = clock
        self._stream = stream
        self._follow = follow
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="corevo-loadtest-log",
                                        daemon=True)
        self._thread.start()

    def _lines(self) -> Iterator[bytes]:
        while True:
            raw = self._stream.readline()
            if raw:
                yield raw
            elif not self._follow or self._done.wait(0.1):
                return

    def _run(self) -> None:
        with open(self.path, "ab") as out:
            for raw in self._lines():
                out.write(raw)
                out.flush()
                text = raw.decode(errors="replace").rstrip("\n")
                self.tail = (self.tail + [text])[-40:]
                found = parse_stall_line(text, self._clock())
                if found is not None and found.ongoing:
                    self.ongoing[found.worker] = found  # the latest word on it
                elif found is not None:
                    self.ongoing.pop(found.worker, None)
                    if len(self.stalls) < 10_000:
                        self.stalls.append(found)

    def join(self, timeout: float = 5.0) -> None:
        self._done.set()
        self._thread.join(timeout)
        if self._follow and not self._thread.is_alive():
            self._stream.close()


@dataclass
class Target:
    """Where the load goes and where its effects are read."""

    base_url: str
    metrics_url: str
    served: bool
    kind: str = "url"
    workers: int = 0
    mp_dir: Path | None = None
    log: LogTail | None = None
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def supervisor(self) -> subprocess.Popen[bytes] | None:
        return self.procs[0] if self.served and self.procs else None

    def worker_pids(self) -> list[int]:
        sup = self.supervisor
        return [] if sup is None else _worker_children(sup.pid)

    def worker_of(self, pid: int) -> str | None:
        """The ``worker`` label a process writes, read from its own metric files."""
        for _, labels, _ in self._samples_of(pid):
            if "worker" in labels:
                return labels["worker"]
        return None

    def claims_of(self, pid: int) -> dict[str, float] | None:
        """Claims a process started and jobs it ended, from its own metric files (None
        when it wrote no claim series): read right after a SIGKILL, their difference is
        what the dead worker left running for recovery to reconcile.
        """
        started = ended = 0.0
        seen = False
        for sample, labels, value in self._samples_of(pid):
            if sample == "corevo_claim_start_total":
                seen = True
                started += value if labels.get("outcome") == "started" else 0.0
            elif sample == "corevo_job_terminal_total":
                ended += value
        return {"started": started, "terminal": ended} if seen else None

    def _samples_of(self, pid: int) -> Iterator[tuple[str, dict[str, str], float]]:
        if self.mp_dir is None:
            return
        from ..mpdir.dbfile import CorruptFile, parse_key, read_db

        fd = os.open(self.mp_dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for name in sorted(os.listdir(fd)):
                if not name.endswith(f"_{pid}.db"):
                    continue
                try:
                    entries = read_db(fd, name, str(self.mp_dir / name), accumulator=False)
                except (OSError, CorruptFile):
                    continue
                for key, (value, _) in entries.items():
                    try:
                        _, sample, labels, _ = parse_key(key)
                    except CorruptFile:
                        continue
                    yield sample, dict(labels), value
        finally:
            os.close(fd)

    def close(self) -> None:
        if not self.served and self.log is not None:
            self.log.join()
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.log is not None:
            self.log.join()


def _worker_children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid != pid:
                continue
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if b"resource_tracker" not in cmd:
            out.append(int(entry))
    return sorted(out)


def detect_kind(app: str, env: dict[str, str]) -> str:
    """``asgi``, ``aiohttp`` or ``aiohttp-factory``, by importing APP in a subprocess."""
    if not re.fullmatch(r"[A-Za-z_][\w.]*(:[A-Za-z_][\w.]*)?", app):
        raise WorkloadError(f"not an import path (pkg.module:app) or a URL: {app!r}",
                            source="APP")
    clean = {k: v for k, v in env.items() if k not in ("PROMETHEUS_MULTIPROC_DIR",
                                                        "COREVO_WORKER")}
    try:
        done = subprocess.run([sys.executable, "-c", _DETECT, app], env=clean,
                              capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        raise WorkloadError(f"importing {app} took more than 60 s", source="APP") from None
    for line in done.stdout.splitlines():
        if line.startswith("KIND "):
            return line.split()[1]
    said = done.stderr.strip().splitlines()
    raise WorkloadError(f"cannot import {app}: {said[-1] if said else 'no output'}",
                        source="APP")


def serve_app(app: str, *, workers: int, env: dict[str, str], out_dir: Path,
              clock: Callable[[], float], ready_timeout: float = 60.0) -> Target:
    """Start APP in ``workers`` processes plus its metrics endpoint; wait until both answer."""
    kind = detect_kind(app, env)
    mp = Path(tempfile.mkdtemp(prefix="corevo-loadtest-mp-"))
    port, metrics_port = _free_port(), _free_port()
    env = {**env, "PROMETHEUS_MULTIPROC_DIR": str(mp), "PYTHONUNBUFFERED": "1",
           "COREVO_LOOP_LOG_INTERVAL": "0"}  # every stall logged with its line
    env.pop("COREVO_WORKER", None)
    if kind == "asgi":
        cmd = [sys.executable, "-m", "uvicorn", app, "--workers", str(workers),
               "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
               "--no-access-log"]
        side = [sys.executable, "-m", "corevo_obs.cli.main", "metrics", "serve", str(mp),
                "--port", str(metrics_port), "--compact-every", "2"]
    else:
        target = app if kind == "aiohttp" else f"{app}()"
        cmd = [sys.executable, "-m", "gunicorn", "-c", "python:corevo_obs.loadtest.gunicorn_conf",
               "-k", "aiohttp.GunicornWebWorker", "-w", str(workers),
               "-b", f"127.0.0.1:{port}", "--log-level", "warning", target]
        env.update(COREVO_METRICS_PORT=str(metrics_port), COREVO_COMPACT_EVERY="2")
        side = []
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True)]
    assert procs[0].stdout is not None
    tail = LogTail(procs[0].stdout, out_dir / "server.log", clock)
    if side:
        with open(out_dir / "metrics-serve.log", "wb") as log:
            procs.append(subprocess.Popen(side, env=env, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True))
    target_ = Target(f"http://127.0.0.1:{port}", f"http://127.0.0.1:{metrics_port}/metrics",
                     served=True, kind=kind, workers=workers, mp_dir=mp, log=tail, procs=procs)
    try:
        _wait_ready(target_, ready_timeout)
    except BaseException:
        target_.close()
        raise
    return target_


def _wait_ready(target: Target, timeout: float) -> None:
    """Both ports answer and every worker has written a heartbeat."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc in target.procs:
            if proc.poll() is not None:
                said = target.log.tail[-3:] if target.log else []
                raise WorkloadError(f"the server exited with {proc.returncode} before it was "
                                    f"ready: {' | '.join(said) or 'no output'}", source="APP")
        if len(workers_reporting(target.metrics_url)) >= target.workers:
            with contextlib.suppress(OSError), urlopen(
                    target.base_url + "/", timeout=2):
                pass
            return
        time.sleep(0.2)
    raise WorkloadError(f"{target.workers} workers did not report a heartbeat within "
                        f"{timeout:.0f} s (is install_loop_health running in the app?)",
                        source="APP")


def workers_reporting(metrics_url: str) -> set[str]:
    """Workers whose heartbeat gauge the endpoint serves (empty when it does not answer)."""
    try:
        with urlopen(metrics_url, timeout=2) as reply:
            text = reply.read().decode(errors="replace")
    except OSError:
        return set()
    return set(re.findall(
        r'^corevo_event_loop_heartbeat_timestamp_seconds\{[^}]*worker="([^"]+)"', text, re.M))
