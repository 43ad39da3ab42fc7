"""A worker killed while frozen is reported, not lost.

gunicorn kills a worker that has not notified it for ``timeout`` seconds (SIGABRT, then
SIGKILL). A worker whose event loop is frozen cannot say anything then (a uvicorn worker
leaves SIGABRT at its default, and an asyncio worker's handlers run on the frozen loop),
so the two halves work apart:

* in the worker, :func:`keep_ongoing` hands every in-progress stall report of its
  watchdogs (logged while the stall lasts) to the multiprocess directory
  (:mod:`corevo_obs.mpdir.stalls`);
* in the master, :func:`report_kill` runs when gunicorn reaps a worker it aborted: it
  logs the worker's last in-progress report (worker, pid, ``file:line``) with the
  stall's true age at the kill (from the stall's start: the report itself may be
  seconds old, as reports come at doubling intervals), and counts
  ``corevo_worker_killed_total{worker, reason="timeout"}`` in :class:`KillCounter`,
  which the master's endpoint serves beside the workers' aggregate, with the stall
  (``corevo_worker_killed_stall_seconds{worker, cause, where}``, the latest per worker)
  for the alert to name the line. Every worker slot's count is 0 from its first fork.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from ..core.catalog import spec, zero_label_sets
from ..loop.watchdog import StallReport, add_ongoing_listener
from ..mpdir.stalls import OngoingStall, clear_ongoing, read_ongoing, write_ongoing

__all__ = ["KillCounter", "keep_ongoing", "report_kill"]

_KILLED = spec("corevo_worker_killed_total")
_STALL = spec("corevo_worker_killed_stall_seconds")


class KillCounter(Collector):
    """``corevo_worker_killed_total`` as the master counts it: in its own memory (the
    master writes no metric files), served by adding this collector to its registry."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], int] = {}
        #: worker -> (cause, where, age at the kill) of its latest kill
        self._stalls: dict[str, tuple[str, str, float]] = {}

    def zero(self, worker: str) -> None:
        """Expose ``worker``'s kill counts at 0 (``catalog.ZEROED``), before any kill."""
        with self._lock:
            for _, labels in zero_label_sets("gunicorn-master", worker=worker):
                self._counts.setdefault((labels["worker"], labels["reason"]), 0)

    def stalled(self, worker: str, stall: OngoingStall | None) -> None:
        """Keep the stall ``worker`` was killed in, replacing its previous one (None: the
        kill came with no stall report, so an older kill's line is not shown for it)."""
        with self._lock:
            if stall is None:
                self._stalls.pop(worker, None)
                return
            cause = stall.cause if stall.cause in _STALL.values["cause"] else "unknown"
            self._stalls[worker] = (cause, stall.where, stall.seconds)

    def inc(self, worker: str, reason: str) -> None:
        if reason not in _KILLED.values["reason"]:
            raise ValueError(f"kill reason {reason!r} is not one of {_KILLED.values['reason']}")
        with self._lock:
            self._counts[worker, reason] = self._counts.get((worker, reason), 0) + 1

    def value(self, worker: str, reason: str) -> int:
        with self._lock:
            return self._counts.get((worker, reason), 0)

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        family = CounterMetricFamily(_KILLED.name, _KILLED.help, labels=list(_KILLED.labels))
        stalls = GaugeMetricFamily(_STALL.name, _STALL.help, labels=list(_STALL.labels))
        with self._lock:
            for (worker, reason), count in sorted(self._counts.items()):
                family.add_metric([worker, reason], count)
            for worker, (cause, where, seconds) in sorted(self._stalls.items()):
                stalls.add_metric([worker, cause, where], seconds)
        yield family
        yield stalls


def at_kill(stall: OngoingStall, now: float) -> OngoingStall:
    """``stall`` with its age at ``now``: from the stall's start (report time minus its
    age then), since the last report may be half the stall old (doubling intervals)."""
    started = stall.reported_at - stall.seconds
    return dataclasses.replace(stall, seconds=max(stall.seconds, now - started))


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
                timeout: float | None, counter: KillCounter, *,
                now: float | None = None) -> str:
    """Master side, for a worker reaped after a timeout kill: log and count it; returns
    the logged text. ``log`` is gunicorn's logger (its ``error`` method); ``now`` the
    wall time of the kill (default: now), which the stall's age is counted up to."""
    counter.inc(worker, "timeout")
    stall = read_ongoing(directory, pid) if directory is not None else None
    if stall is not None:
        stall = at_kill(stall, time.time() if now is None else now)
    counter.stalled(worker, stall)
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
