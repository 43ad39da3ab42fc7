"""Stall watchdog: a side thread that catches the loop in the act and names the line.

The loop thread only stamps a beat (cheap). The watchdog thread notices when no beat has
arrived for longer than the threshold, grabs the loop thread's stack while the stall is
still going on (so the innermost frame is the blocking call), and, when the loop comes
back, records the stall's duration, keeps a bounded history and logs one warning.

A stall that holds the GIL in C code cannot be caught in the act; it is still counted
when it ends, with ``captured=False``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from prometheus_client import CollectorRegistry

from .. import guard
from ..identity import worker_name
from ..metrics import child
from .stacks import FrameInfo, capture_thread, innermost_project_frame

log = logging.getLogger("corevo_obs.stall")

DEFAULT_THRESHOLD: Final = 0.1
DEFAULT_CHECK_INTERVAL: Final = 0.05
DEFAULT_MAX_REPORTS: Final = 50
DEFAULT_LOG_INTERVAL: Final = 5.0
_MIN_WAIT: Final = 0.002
_MAX_WAIT: Final = 1.0


@dataclass(frozen=True)
class StallReport:
    """One stall: how long, where (code locations only), whether it was caught in the act."""

    worker: str
    duration: float
    ended_at: float
    frames: tuple[FrameInfo, ...] = ()
    culprit: FrameInfo | None = None
    captured: bool = False
    detected_after: float | None = field(default=None, compare=False)

    def headline(self) -> str:
        where = str(self.culprit) if self.culprit else (
            "no project frame" if self.captured else "stack not captured (GIL held in C?)"
        )
        return f"event loop of worker {self.worker} stalled {self.duration:.3f}s at {where}"

    def format(self) -> str:
        lines = [self.headline()]
        for fi in self.frames:
            mark = " <-- innermost project frame" if fi == self.culprit else ""
            lines.append(f"  {fi}{mark}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "duration_seconds": round(self.duration, 6),
            "ended_at": self.ended_at,
            "captured": self.captured,
            "culprit": None if self.culprit is None else {
                "file": self.culprit.filename,
                "line": self.culprit.lineno,
                "function": self.culprit.function,
            },
            "frames": [str(f) for f in self.frames],
        }


StallListener = Callable[[StallReport], None]


class StallWatchdog:
    """Notice a loop that has not run for ``threshold`` seconds and capture its stack.

    Feed it beats with :meth:`beat` from the loop thread (the lag sampler does this when
    installed through :func:`corevo_obs.install_loop_health`).
    """

    def __init__(
        self,
        *,
        threshold: float = DEFAULT_THRESHOLD,
        check_interval: float = DEFAULT_CHECK_INTERVAL,
        beat_interval: float = 0.02,
        worker: str | None = None,
        registry: CollectorRegistry | None = None,
        max_reports: int = DEFAULT_MAX_REPORTS,
        log_interval: float = DEFAULT_LOG_INTERVAL,
        project_roots: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if threshold <= 0 or check_interval <= 0:
            raise ValueError("stall threshold and check interval must be positive")
        self.threshold = threshold
        self.check_interval = check_interval
        self.beat_interval = beat_interval
        self.worker = worker_name(worker)
        self.project_roots = tuple(project_roots)
        self.reports: deque[StallReport] = deque(maxlen=max_reports)
        self._registry = registry
        self._clock = clock
        self._wall = wall_clock
        self._log_interval = log_interval
        self._last_log = float("-inf")
        self._suppressed = 0
        self._stalls = child("corevo_event_loop_stalls_total", registry, worker=self.worker)
        self._stall_seconds = child(
            "corevo_event_loop_stall_seconds", registry, worker=self.worker
        )
        self._listeners: list[StallListener] = []
        self._last_beat = clock()
        # beat() (loop thread) only appends to _ended and stamps _last_beat: a deque append
        # and a float store, both atomic, so the beat takes no lock. Everything else that
        # changes (_pending, draining _ended, the log throttle) is shared by the watchdog
        # thread and stop() (the loop thread) and changes under _state.
        self._state = threading.Lock()
        self._ended: deque[tuple[float, float]] = deque()
        self._pending: tuple[float, tuple[FrameInfo, ...]] | None = None
        self._loop_thread: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.wakes = 0  # times the thread woke (each one takes the GIL)

    # --- loop thread side: keep it tiny ---
    def beat(self, now: float, lag: float) -> None:
        if lag >= self.threshold:
            self._ended.append((now, lag))  # before the stamp: _check relies on this order
        self._last_beat = now

    # --- lifecycle ---
    def add_listener(self, listener: StallListener) -> None:
        """Called on the watchdog thread with each finished report (e.g. a py-spy capture)."""
        self._listeners.append(listener)

    def start(self, loop_thread_id: int | None = None) -> StallWatchdog:
        if self._thread is not None:
            raise RuntimeError("watchdog already started")
        self._loop_thread = loop_thread_id or threading.get_ident()
        self._last_beat = self._clock()
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, name=f"corevo-stall-watchdog[{self.worker}]", daemon=True
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if not thread.is_alive():
                self._thread = None
        with self._state:
            reports = self._drain_ended()
        self._record_all(reports)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def stalled_for(self) -> float:
        """Seconds the loop has been silent beyond its beat interval (0 when healthy)."""
        return max(0.0, self._clock() - self._last_beat - self.beat_interval)

    # --- watchdog thread ---
    def _run(self) -> None:
        while not self._stop.wait(self._wait()):
            self.wakes += 1
            try:
                self._check()
            except Exception as exc:  # noqa: BLE001 - the thread must outlive any bug
                guard.absorb("stall_watchdog", exc, worker=self.worker, registry=self._registry)

    def _wait(self) -> float:
        try:
            return self._next_wait()
        except Exception as exc:  # noqa: BLE001 - e.g. an injected clock that raises
            guard.absorb("stall_watchdog", exc, worker=self.worker, registry=self._registry)
            return self.check_interval

    def _next_wait(self) -> float:
        """Sleep until the loop would first count as stalled, not on a fixed poll.

        A healthy loop keeps pushing that moment ahead, so the thread wakes about once
        per threshold instead of every check interval (each wake takes the GIL from a
        busy loop); once a stall is in progress it polls to catch its end promptly.
        """
        with self._state:
            if self._pending is not None or self._ended:
                return self.check_interval
        due = self._last_beat + self.beat_interval + self.threshold - self._clock()
        return min(max(due, _MIN_WAIT), _MAX_WAIT)

    def _check(self) -> None:
        with self._state:
            reports = self._drain_ended()
            pending = self._pending
            if pending is not None and self._last_beat > pending[0] and not self._ended:
                self._pending = None  # the loop came back below the threshold: nothing to report
            if self._pending is None and self.stalled_for >= self.threshold:
                assert self._loop_thread is not None
                frames = capture_thread(self._loop_thread)
                if frames is not None:
                    self._pending = (self._clock(), frames)
        self._record_all(reports)

    def _drain_ended(self) -> list[StallReport]:
        """Pair each ended stall with the stack caught during it; the caller holds _state."""
        reports: list[StallReport] = []
        while self._ended:
            woke, lag = self._ended.popleft()
            pending, self._pending = self._pending, None
            frames: tuple[FrameInfo, ...] = ()
            detected_after = None
            if pending is not None and pending[0] <= woke:
                frames = pending[1]
                detected_after = pending[0] - (woke - lag)
            elif pending is not None:
                self._pending = pending  # belongs to a later stall
            reports.append(
                StallReport(
                    worker=self.worker,
                    duration=lag,
                    ended_at=self._wall() - (self._clock() - woke),
                    frames=frames,
                    culprit=innermost_project_frame(frames, self.project_roots),
                    captured=bool(frames),
                    detected_after=detected_after,
                )
            )
        return reports

    def _record_all(self, reports: list[StallReport]) -> None:
        """Outside _state: a slow listener (a py-spy capture) must not hold up stop()."""
        for report in reports:
            self._record(report)

    def _record(self, report: StallReport) -> None:
        self.reports.append(report)
        try:
            self._stalls.inc()
            self._stall_seconds.observe(report.duration)
        except Exception as exc:  # noqa: BLE001
            guard.absorb("stall_metrics", exc, worker=self.worker, registry=self._registry)
        try:
            self._log(report)
        except Exception as exc:  # noqa: BLE001 - a broken log handler is the host's
            guard.absorb("stall_log", exc, worker=self.worker, registry=self._registry)
        for listener in self._listeners:
            try:
                listener(report)
            except Exception as exc:  # noqa: BLE001
                guard.absorb("stall_listener", exc, worker=self.worker, registry=self._registry)

    def _log(self, report: StallReport) -> None:
        with self._state:
            now = self._clock()
            if now - self._last_log < self._log_interval:
                self._suppressed += 1
                return
            self._last_log = now
            suppressed, self._suppressed = self._suppressed, 0
        tail = f" ({suppressed} more since the last report)" if suppressed else ""
        log.warning(
            "%s%s\n%s", report.headline(), tail, "\n".join(f"  {f}" for f in report.frames),
            extra={"corevo_stall": report.as_dict()},
        )
