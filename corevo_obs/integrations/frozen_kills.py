"""A worker killed while frozen is reported, not lost.

gunicorn kills a worker that has not notified it for ``timeout`` seconds (SIGABRT, then
SIGKILL). A worker whose event loop is frozen cannot say anything then (a uvicorn worker
leaves SIGABRT at its default, and an asyncio worker's handlers run on the frozen loop),
so the two halves work apart:

* in the worker, :func:`keep_ongoing` hands every in-progress stall report of its
  watchdogs (logged while the stall lasts) to the multiprocess directory
  (:mod:`corevo_obs.mpdir.stalls`);
* in the master, :func:`report_kill` runs when gunicorn reaps a worker it aborted: it
  logs the worker's last in-progress report (worker, pid, ``file:line``) and counts
  ``corevo_worker_killed_total{worker, reason="timeout"}`` in :class:`KillCounter`,
  which the master's endpoint serves beside the workers' aggregate.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from ..core.catalog import spec
from ..loop.watchdog import StallReport, add_ongoing_listener
from ..mpdir.stalls import clear_ongoing, read_ongoing, write_ongoing

__all__ = ["KillCounter", "keep_ongoing", "report_kill"]

_KILLED = spec("corevo_worker_killed_total")


class KillCounter(Collector):
    """``corevo_worker_killed_total`` as the master counts it: in its own memory (the
    master writes no metric files), served by adding this collector to its registry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}

    def inc(self, worker: str, reason: str) -> None:
        if reason not in _KILLED.values["reason"]:
            raise ValueError(f"kill reason {reason!r} is not one of {_KILLED.values['reason']}")
        with self._lock:
            self._counts[worker, reason] = self._counts.get((worker, reason), 0) + 1

    def value(self, worker: str, reason: str) -> int:
        with self._lock:
            return self._counts.get((worker, reason), 0)

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(_KILLED.name, _KILLED.help, labels=list(_KILLED.labels))
        with self._lock:
            for (worker, reason), count in sorted(self._counts.items()):
                family.add_metric([worker, reason], count)
        yield family


def keep_ongoing(directory: Path) -> None:
    """Worker side: keep this process's stall in progress in ``directory`` (at most one
    file per process, gone when the stall ends)."""
    written = [False]

    def listener(report: StallReport | None) -> None:
        if report is not None:
            write_ongoing(directory, report.as_dict())
            written[0] = True
        elif written[0]:
            written[0] = False
            clear_ongoing(directory)

    add_ongoing_listener(listener)


def report_kill(log: Any, directory: Path | None, worker: str, pid: int,
                timeout: float | None, counter: KillCounter) -> str:
    """Master side, for a worker reaped after a timeout kill: log and count it; returns
    the logged text. ``log`` is gunicorn's logger (its ``error`` method)."""
    counter.inc(worker, "timeout")
    stall = read_ongoing(directory, pid) if directory is not None else None
    after = f" ({timeout}s)" if timeout is not None else ""
    head = f"corevo-obs: worker {worker} (pid {pid}) was killed by gunicorn's worker timeout{after}"
    if stall is not None:
        text = f"{head} while frozen: {stall.describe()}"
    else:
        text = (f"{head}; its watchdog reported no stall in progress (install_loop_health "
                "not called in the worker, or the loop held the GIL in C code)")
    log.error("%s", text)
    if directory is not None:
        clear_ongoing(directory, pid)
    return text
