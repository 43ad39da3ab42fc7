"""gunicorn server hooks: one metrics endpoint per host, stable worker names, dead
workers marked and compacted.

The master serves the multiprocess aggregate of every worker on one port (scrape that
one target per host: a per-worker port would make Prometheus' ``sum()`` count every
worker once per target). A worker that gunicorn kills for its ``timeout`` (a loop frozen
that long) is logged by the master with the stall its watchdog reported while frozen,
and counted in ``corevo_worker_killed_total{reason="timeout"}``
(:mod:`corevo_obs.integrations.frozen_kills`). Each worker takes a slot name
``w0``..``wN-1`` that the worker started in place of a dead one reuses, so labels stay
bounded across restarts. When a worker exits the master marks it dead (its live gauges
go) and the janitor folds its files into the accumulators (its counters stay).

In ``gunicorn.conf.py``::

    from corevo_obs.integrations.gunicorn import child_exit, post_fork, pre_fork, when_ready

Settings (environment, read in the master): ``$PROMETHEUS_MULTIPROC_DIR`` (required: an
empty directory the workers can write), ``$COREVO_METRICS_PORT`` (default 9430),
``$COREVO_METRICS_HOST`` (default 127.0.0.1), ``$COREVO_COMPACT_EVERY`` seconds
(default 30), and ``$COREVO_COMPACT_AT_EXIT`` for the workers. These run inside gunicorn:
a bad value is counted (``corevo_instrumentation_errors_total{component="gunicorn-config"}``),
logged once with its source, and its default is used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Final

from prometheus_client import CollectorRegistry

from ..core import promclient
from ..core.errors import ConfigError, MetricsDirError
from ..core.guard import absorb
from ..core.identity import WORKER_ENV
from ..core.settings import option, resolve_in_host
from ..exposition import (
    DEFAULT_HOST,
    MetricsServer,
    check_metrics_dir,
    enable_multiprocess,
    exposition_registry,
    mark_process_dead,
    multiprocess_dir,
)
from ..mpdir.hooks import ENV_PREFIX, ExitSettings
from .frozen_kills import KillCounter, keep_ongoing, report_kill

__all__ = [
    "GunicornSettings",
    "child_exit",
    "master_settings",
    "post_fork",
    "pre_fork",
    "when_ready",
]


DEFAULT_PORT: Final = 9430
DEFAULT_COMPACT_EVERY: Final = 30.0
#: ``corevo_instrumentation_errors_total{component=...}`` of a bad setting in these hooks
CONFIG_COMPONENT: Final = "gunicorn-config"
#: ``corevo_instrumentation_errors_total{component=...}`` of a worker that started while
#: the metrics directory had no room
MPDIR_COMPONENT: Final = "gunicorn-metrics-dir"
_server: dict[str, MetricsServer] = {}
#: the master's count of the workers it killed, served beside the workers' aggregate
KILLS: Final = KillCounter()


@dataclass(frozen=True)
class GunicornSettings(ExitSettings):
    """The hooks' settings: ``$COREVO_METRICS_PORT``, ``$COREVO_METRICS_HOST``,
    ``$COREVO_COMPACT_EVERY`` (seconds, 0 = no janitor) and the workers'
    ``$COREVO_COMPACT_AT_EXIT``, over the defaults."""

    metrics_port: int = option(DEFAULT_PORT, minimum=0, maximum=65535)
    metrics_host: str = option(DEFAULT_HOST)
    compact_every: float = option(DEFAULT_COMPACT_EVERY, minimum=0, maximum=86_400)


_resolved: dict[str, GunicornSettings] = {}


def master_settings(registry: CollectorRegistry | None = None) -> GunicornSettings:
    """The settings the hooks use. A server hook must not stop gunicorn over a metrics
    setting: a bad value is counted, logged once and replaced by its default.

    ``when_ready`` resolves them once in the master; the workers inherit the result
    through the fork and hand ``compact_at_exit`` to ``enable_multiprocess``, so a bad
    ``$COREVO_COMPACT_AT_EXIT`` stops no worker and the environment stays the user's.
    """
    return resolve_in_host(GunicornSettings, ENV_PREFIX, component=CONFIG_COMPONENT,
                           registry=registry)


def _settings() -> GunicornSettings:
    """The master's settings (resolved in ``when_ready``), or resolved now (hooks used
    without ``when_ready``)."""
    if "master" not in _resolved:
        _resolved["master"] = master_settings()
    return _resolved["master"]


def when_ready(server: Any) -> None:
    """Master, once listening: check the directory and serve the aggregate."""
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not directory:
        raise ConfigError("set $PROMETHEUS_MULTIPROC_DIR for the workers' metric files",
                          source="corevo gunicorn hooks")
    check_metrics_dir(directory)
    cfg = _resolved["master"] = master_settings()
    registry = exposition_registry("host")
    registry.register(KILLS)
    _server["master"] = MetricsServer(port=cfg.metrics_port, host=cfg.metrics_host,
                                      registry=registry,
                                      compact_every=cfg.compact_every or None).start()
    server.log.info("corevo-obs metrics for all workers at %s", _server["master"].url)


def pre_fork(server: Any, worker: Any) -> None:
    """Master, before each fork: the lowest slot no live worker holds."""
    taken = {getattr(w, "corevo_slot", None) for w in server.WORKERS.values()}
    slot = 0
    while slot in taken:
        slot += 1
    worker.corevo_slot = slot
    KILLS.zero(f"w{slot}")  # its kill count exists at 0 before a kill (catalog.ZEROED)


def post_fork(server: Any, worker: Any) -> None:
    """Worker, right after the fork: its name, then multiprocess mode.

    A directory that has no room now (a full disk) must not stop the worker: gunicorn
    halts the whole server when a worker fails to boot. The failure is counted and
    logged once, and the worker writes its metric files once room returns (until then
    its values are kept in memory); it has no writer record, so it counts as live."""
    _server.clear()  # the master's server thread did not survive the fork
    os.environ[WORKER_ENV] = f"w{getattr(worker, 'corevo_slot', worker.age)}"
    try:
        directory = enable_multiprocess(compact_at_exit=_settings().compact_at_exit)
    except MetricsDirError as exc:
        found = multiprocess_dir()
        if found is None or not found.is_dir():
            raise  # no directory at all: a setup mistake, not a full disk
        absorb(MPDIR_COMPONENT, exc)
        promclient.use_multiprocess_values()
        directory = found
    keep_ongoing(directory)  # the stall it is frozen in, for child_exit to name


def child_exit(server: Any, worker: Any) -> None:
    """Master, after a worker exited (however): its live gauges go now; its counters
    are folded by the janitor's next pass. A worker gunicorn aborted for its timeout is
    logged with the stall it was frozen in, and counted."""
    mark_process_dead(worker.pid)
    if getattr(worker, "aborted", False):
        name = f"w{getattr(worker, 'corevo_slot', worker.age)}"
        timeout = getattr(getattr(server, "cfg", None), "timeout", None)
        report_kill(server.log, multiprocess_dir(), name, worker.pid, timeout, KILLS)
