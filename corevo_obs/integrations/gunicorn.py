"""gunicorn server hooks: one metrics endpoint per host, stable worker names, dead
workers marked and compacted.

The master serves the multiprocess aggregate of every worker on one port (scrape that
one target per host: a per-worker port would make Prometheus' ``sum()`` count every
worker once per target). Each worker takes a slot name ``w0``..``wN-1`` that the worker
started in place of a dead one reuses, so labels stay bounded across restarts. When a
worker exits the master marks it dead (its live gauges go) and the janitor folds its
files into the accumulators (its counters stay).

In ``gunicorn.conf.py``::

    from corevo_obs.integrations.gunicorn import child_exit, post_fork, pre_fork, when_ready

Settings (environment, read in the master): ``$PROMETHEUS_MULTIPROC_DIR`` (required: an
empty directory the workers can write), ``$COREVO_METRICS_PORT`` (default 9430),
``$COREVO_METRICS_HOST`` (default 127.0.0.1), ``$COREVO_COMPACT_EVERY`` seconds
(default 30).
"""

from __future__ import annotations

import os
from typing import Any, Final

from ..core.errors import ConfigError
from ..core.identity import WORKER_ENV
from ..exposition import (
    DEFAULT_HOST,
    MetricsServer,
    check_metrics_dir,
    enable_multiprocess,
    mark_process_dead,
)

__all__ = [
    "child_exit",
    "post_fork",
    "pre_fork",
    "when_ready",
]


DEFAULT_PORT: Final = 9430
DEFAULT_COMPACT_EVERY: Final = 30.0
_server: dict[str, MetricsServer] = {}


def _number(name: str, default: float, *, integer: bool = False) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        raise ConfigError(f"not a number: {raw!r}", source=f"${name}") from None
    if not value >= 0 or value == float("inf"):
        raise ConfigError(f"must be a finite number >= 0, got {raw!r}", source=f"${name}")
    return value


def when_ready(server: Any) -> None:
    """Master, once listening: check the directory and serve the aggregate."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not directory:
        raise ConfigError("set $PROMETHEUS_MULTIPROC_DIR for the workers' metric files",
                          source="corevo gunicorn hooks")
    check_metrics_dir(directory)
    port = int(_number("COREVO_METRICS_PORT", DEFAULT_PORT, integer=True))
    host = os.environ.get("COREVO_METRICS_HOST", DEFAULT_HOST)
    every = _number("COREVO_COMPACT_EVERY", DEFAULT_COMPACT_EVERY)
    _server["master"] = MetricsServer(port=port, host=host, compact_every=every or None).start()
    server.log.info("corevo-obs metrics for all workers at %s", _server["master"].url)


def pre_fork(server: Any, worker: Any) -> None:
    """Master, before each fork: the lowest slot no live worker holds."""
    taken = {getattr(w, "corevo_slot", None) for w in server.WORKERS.values()}
    slot = 0
    while slot in taken:
        slot += 1
    worker.corevo_slot = slot


def post_fork(server: Any, worker: Any) -> None:
    """Worker, right after the fork: its name, then multiprocess mode."""
    _server.clear()  # the master's server thread did not survive the fork
    os.environ[WORKER_ENV] = f"w{getattr(worker, 'corevo_slot', worker.age)}"
    enable_multiprocess()


def child_exit(server: Any, worker: Any) -> None:
    """Master, after a worker exited (however): its live gauges go now; its counters
    are folded by the janitor's next pass."""
    mark_process_dead(worker.pid)
