"""Run the demo: validate options, run the three drills, print a diagnosis (text or JSON).

Everything lives in one temp dir (SQLite files, the multiprocess metrics directory, the
workers' logs) that is removed at the end; every child is stopped on any exit path.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType, ModuleType
from typing import Any

from ..core.errors import ConfigError
from . import drill_frozen, drill_quota, drill_sticky, report
from .context import DemoContext
from .procs import Children
from .progress import Progress
from .quota import check_redis

DRILLS: tuple[tuple[str, ModuleType], ...] = (
    ("frozen_worker", drill_frozen),
    ("sticky_connection", drill_sticky),
    ("quota_leak", drill_quota),
)


def _check_ports(first: int, count: int) -> None:
    if not 1024 <= first <= 65535 - count + 1:
        raise ConfigError(f"--metrics-port must leave room for {count} ports in 1024..65535, "
                          f"got {first}", source="demo")
    for port in range(first, first + count):
        with socket.socket() as s:
            # as the endpoint itself binds: a port left in TIME_WAIT by scrapes is free
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
            except OSError as exc:
                raise ConfigError(f"port {port} on 127.0.0.1 is not free ({exc.strerror})",
                                  source="--metrics-port") from None


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _serve(ctx: DemoContext) -> None:
    """Keep the workers up and one endpoint for all of them (one target per host) until
    Ctrl-C: it serves every drill's series, each worker once."""
    assert ctx.metrics_port is not None
    serving = [ctx.children.spawn(
        f"w{i}", "--role", "serve",
        *(["--metrics-port", str(ctx.metrics_port), "--metrics-scope", "host"] if i == 0 else []))
        for i in range(ctx.workers)]
    for c in serving:
        ctx.children.ready(c)
    print(f"metrics of every drill and worker on http://127.0.0.1:{ctx.metrics_port}/metrics"
          " - press Ctrl-C to stop", file=sys.stderr, flush=True)
    try:
        while all(c.proc.poll() is None for c in serving):
            time.sleep(0.5)
    except KeyboardInterrupt:
        return
    raise ConfigError("a metrics worker exited early", source="demo")


def run_demo(*, workers: int = 3, as_json: bool = False, short: bool = False,
             metrics_port: int | None = None, redis_url: str | None = None) -> int:
    if not 2 <= workers <= 16:
        raise ConfigError(f"--workers must be 2..16, got {workers}", source="demo")
    if metrics_port is not None:
        _check_ports(metrics_port, workers)
    if redis_url is not None:
        check_redis(redis_url)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="corevo-demo-") as tmp:
        workdir = Path(tmp)
        (workdir / "metrics").mkdir()
        env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(workdir / "metrics"))
        env.pop("COREVO_WORKER", None)
        children = Children(workdir, env)
        progress = Progress(len(DRILLS))
        ctx = DemoContext(workers, short, workdir, children, progress, metrics_port, redis_url)
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            progress.event(f"corevo-obs demo: {workers} workers, work dir {tmp}")
            drills: dict[str, Any] = {key: mod.run(ctx) for key, mod in DRILLS}
            result = {"workers": workers, "short": short,
                      "duration_seconds": round(time.monotonic() - started, 1),
                      "drills": drills}
            result["summary"] = report.summary(result)
            if as_json:
                print(json.dumps(result, indent=2), flush=True)
            else:
                report.print_text(result)
            if metrics_port is not None:
                _serve(ctx)
        finally:
            progress.clear()
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
            try:
                children.stop()
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
                signal.signal(signal.SIGTERM, previous)
    return 0
