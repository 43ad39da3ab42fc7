"""Stall watchdog: a side thread that catches the loop in the act and names the line.

The loop thread only stamps a beat (cheap). The watchdog thread notices when no beat has
arrived for longer than the threshold, grabs the loop thread's stack while the stall is
still going on (so the innermost frame is the blocking call), and reports it while it
lasts: a stall past ``ongoing_after`` is logged at once and again at doubling intervals,
and the ``corevo_event_loop_stall_in_progress_seconds`` gauge carries its age, because a
worker frozen for good may be killed (gunicorn's timeout, a liveness probe) before it
comes back. When the loop comes back the stall's duration is recorded, a bounded history
kept and one final warning logged.

A stall that holds the GIL in C code cannot be caught in the act; it is still counted
when it ends, with ``captured=False``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from prometheus_client import CollectorRegistry

from ..core import guard
from ..core.errors import ConfigError
from ..core.lifecycle import DualService, astops, starts, stops
from ..core.telemetry import HasTelemetry, Telemetry
from . import schedstat
from .causes import (
    CAUSES,
    Beat,
    BusyThread,
    Caught,
    Probe,
    Sched,
    ThreadLook,
    Window,
    attribute,
    busiest_thread,
    may_be_gil,
)
from .gcwatch import GcWatch
from .held_task import HeldTask, held_task
from .stacks import FrameFilter, FrameInfo, capture_thread

log = logging.getLogger("corevo_obs.stall")

DEFAULT_THRESHOLD: Final = 0.1
DEFAULT_CHECK_INTERVAL: Final = 0.05
DEFAULT_MAX_REPORTS: Final = 50
DEFAULT_LOG_INTERVAL: Final = 5.0
DEFAULT_STACK_FRAMES: Final = 6
DEFAULT_ONGOING_AFTER: Final = 1.0
LogFormat = Literal["text", "json"]
LOG_FORMATS: Final = ("text", "json")
_MIN_WAIT: Final = 0.002
_MAX_WAIT: Final = 1.0
_MAX_SAMPLES: Final = 8  # stacks kept per stall (the first and later changes)
_CLOSE_TIMEOUT: Final = 2.0
_EXIT_POLLS: Final = 50
_NAMES_KEPT: Final = 1024
_SCHEDS: Final = 32  # watchdog readings kept (about 3 s of a healthy loop's wakes)
_BLOCKER_LINES: Final = 8


def _exemplar(task: HeldTask | None) -> dict[str, str] | None:
    if task is None or task.trace_id is None or task.span_id is None:
        return None
    return {"trace_id": task.trace_id, "span_id": task.span_id}


@dataclass(frozen=True)
class StallReport:
    """One stall: how long, why, where (code locations only), whether caught in the act.

    ``cause`` is one of :data:`corevo_obs.loop.causes.CAUSES`; ``evidence`` says what it
    rests on; ``frames`` is the full stack (bounded), ``project_frames`` the host's own
    frames of it and ``stack`` the trimmed rendering a person reads.
    """

    worker: str
    duration: float
    ended_at: float
    frames: tuple[FrameInfo, ...] = ()
    culprit: FrameInfo | None = None
    captured: bool = False
    detected_after: float | None = field(default=None, compare=False)
    cause: str = "unknown"
    summary: str = ""
    evidence: tuple[str, ...] = ()
    project_frames: tuple[FrameInfo, ...] = ()
    stack: tuple[str, ...] = ()
    idle: bool = False
    blocker: BusyThread | None = None
    measures: Mapping[str, float] = field(default_factory=dict, compare=False)
    ongoing: bool = False
    pid: int = field(default_factory=os.getpid, compare=False)
    task: HeldTask | None = None  # the asyncio task caught holding the loop

    @property
    def started_at(self) -> float:
        """Unix time the stall began (``ended_at`` is the report's time while ``ongoing``)."""
        return self.ended_at - self.duration

    @property
    def where(self) -> str:
        if self.culprit is not None:
            return str(self.culprit)
        if self.idle:
            return "its selector wait (idle loop)"
        return "no project frame" if self.captured else "stack not captured"

    def headline(self) -> str:
        """``[cause] event loop of worker W stalled Ds at file:line:function``: the cause
        leads, and the line still ends with where (what log parsers read)."""
        if self.ongoing:
            return (f"[{self.cause}] event loop of worker {self.worker} STILL STALLED, "
                    f"{self.duration:.3f}s so far, at {self.where}")
        return (f"[{self.cause}] event loop of worker {self.worker} stalled "
                f"{self.duration:.3f}s at {self.where}")

    def format(self) -> str:
        """Headline, why and the evidence, the host's frames, then the trimmed stack."""
        lines = [self.headline()]
        if self.summary:
            lines.append(f"  why: {self.summary}")
        lines.extend(f"  evidence: {e}" for e in self.evidence)
        if self.task is not None:
            lines.append(f"  held by {self.task}")
        if self.project_frames:
            lines.append("  project frames (innermost last):")
            lines.extend(f"    {f}" for f in self.project_frames)
        if self.stack:
            lines.append(f"  stack ({len(self.frames)} frames, trimmed):")
            lines.extend(f"    {line}" for line in self.stack)
        if self.blocker is not None and self.blocker.frames:
            lines.append(f"  busy thread {self.blocker.name!r} (innermost last):")
            lines.extend(f"    {f}" for f in self.blocker.frames[-_BLOCKER_LINES:])
        return "\n".join(lines)

    def log_line(self, log_format: LogFormat = "text") -> str:
        """The report as one log record that stands alone in any host's log: time (UTC),
        pid and worker lead the text form; ``json`` is one line for log pipelines."""
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(self.ended_at)) + (
            f".{int(self.ended_at % 1 * 1000):03d}Z")
        if log_format == "json":
            return json.dumps({"event": "stall", "time": when, "headline": self.headline(),
                               **self.as_dict()}, separators=(",", ":"))
        return f"{when} pid={self.pid} worker={self.worker} {self.format()}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "pid": self.pid,
            "ongoing": self.ongoing,
            "duration_seconds": round(self.duration, 6),
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "captured": self.captured,
            "cause": self.cause,
            "summary": self.summary,
            "evidence": list(self.evidence),
            "measures": dict(self.measures),
            "culprit": None if self.culprit is None else {
                "file": self.culprit.filename,
                "line": self.culprit.lineno,
                "function": self.culprit.function,
            },
            "project_frames": [str(f) for f in self.project_frames],
            "frames": [str(f) for f in self.frames],
            "blocker": None if self.blocker is None else self.blocker.as_dict(),
            "task": None if self.task is None else self.task.as_dict(),
        }


StallListener = Callable[[StallReport], None]
_BlockerFinder = Callable[[], "BusyThread | None"]


class StallWatchdog(HasTelemetry, DualService):
    """Notice a loop that has not run for ``threshold`` seconds, capture its stack, and
    attribute the stall to a cause (:mod:`corevo_obs.loop.causes`).

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
        stack_frames: int = DEFAULT_STACK_FRAMES,
        ongoing_after: float = DEFAULT_ONGOING_AFTER,
        log_format: LogFormat = "text",
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        problems = [f"{name}={value!r} must be positive" for name, value in
                    (("threshold", threshold), ("check_interval", check_interval))
                    if not value > 0]
        if stack_frames < 0:
            problems.append(f"stack_frames={stack_frames!r} must be 0 or more")
        if not ongoing_after >= 0:
            problems.append(f"ongoing_after={ongoing_after!r} must be 0 or more")
        if log_format not in LOG_FORMATS:
            problems.append(f"log_format={log_format!r} must be one of {LOG_FORMATS}")
        if problems:
            raise ConfigError("; ".join(problems), source="StallWatchdog")
        self.ongoing_after = ongoing_after
        self.log_format: LogFormat = log_format
        #: the stall going on now as last reported (None when the loop runs)
        self.ongoing: StallReport | None = None
        self.threshold = threshold
        self.check_interval = check_interval
        self.beat_interval = beat_interval
        self._telemetry = Telemetry.resolve(worker, registry)
        self.project_roots = tuple(project_roots)
        # taken as given here (no filesystem call on the loop thread); the watchdog
        # thread swaps in the resolved filter when it starts, and a report made on the
        # loop thread (the final drain) keeps to the plain one
        self.frame_filter = self._plain_filter = FrameFilter(self.project_roots)
        self.stack_frames = stack_frames
        self.reports: deque[StallReport] = deque(maxlen=max_reports)
        self._clock = clock
        self._wall = wall_clock
        self._log_interval = log_interval
        self._last_log = float("-inf")
        self._suppressed = 0
        self._stalls = self._telemetry.child("corevo_event_loop_stalls_total")
        self._stall_seconds = self._telemetry.child("corevo_event_loop_stall_seconds")
        self._in_progress = self._telemetry.child("corevo_event_loop_stall_in_progress_seconds")
        self._in_progress_value = 0.0
        self._by_cause = {
            c: self._telemetry.child("corevo_event_loop_stalls_by_cause_total", cause=c)
            for c in CAUSES
        }
        self._listeners: list[StallListener] = []
        self._last_beat = clock()
        # beat() (loop thread) only appends to _ended and stores _beat and _last_beat:
        # a deque append and two stores, all atomic, so the beat takes no lock. Everything
        # else that changes (_pending, draining _ended, the log throttle) is shared by the
        # watchdog thread and stop() (the loop thread) and changes under _state.
        self._state = threading.Lock()
        self._ended: deque[tuple[float, float, Beat | None, Beat]] = deque()
        self._pending: _Pending | None = None
        self._loop_thread: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_native: int | None = None
        self._gc = GcWatch(clock)
        self._probe: Probe | None = None
        self._beat: Beat | None = None
        self._first = False  # True until the first beat after start()
        self._scheds: deque[Sched] = deque(maxlen=_SCHEDS)
        self._threads = ThreadLook()
        self._thread_names: dict[int, str] = {}
        self._thread_count = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._exited = False
        self._on_exit: Callable[[], object] | None = None
        self.wakes = 0  # times the thread woke (each one takes the GIL)

    # --- loop thread side: keep it tiny ---
    def beat(self, now: float, lag: float) -> None:
        # clocks only: they keep the GIL (a file read here would hand it to a busy thread)
        reading = (now, time.thread_time_ns(), time.process_time_ns(), self._gc.total)
        if self._first:
            # the sampler's first tick times only its own sleep: a stall between start()
            # and that tick (an import right after install) is the gap since start()
            self._first = False
            lag = max(lag, now - self._last_beat - self.beat_interval)
        if lag >= self.threshold:
            # before the stamp: _check relies on this order
            self._ended.append((now, lag, self._beat, reading))
        self._beat = reading
        self._last_beat = now

    # --- lifecycle ---
    def add_listener(self, listener: StallListener) -> None:
        """Called on the watchdog thread with each finished report (e.g. a py-spy capture)."""
        self._listeners.append(listener)

    @starts
    def start(self, loop_thread_id: int | None = None,
              loop_native_id: int | None = None,
              loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Start the side thread; call it on the loop thread, or name the loop thread (and
        the loop, whose running task a report names). Returns the watchdog; a second start
        (or a ``with`` after it) keeps the one thread."""
        if loop is None:
            with contextlib.suppress(RuntimeError):
                loop = asyncio.get_running_loop()
        self._loop = loop
        self._loop_thread = loop_thread_id or threading.get_ident()
        self._loop_native = loop_native_id or _native_id(self._loop_thread)
        self._last_beat = self._clock()
        self._stop.clear()
        self._exited = False
        self._gc.install()
        self._first = True
        if self._loop_thread == threading.get_ident():  # a reading to measure it against
            self._beat = (self._last_beat, time.thread_time_ns(), time.process_time_ns(),
                          self._gc.total)
        self._set_in_progress(0.0, force=True)
        self._thread = threading.Thread(
            target=self._run, name=f"corevo-stall-watchdog[{self.worker}]", daemon=True
        )
        self._thread.start()

    def _request_stop(self) -> None:
        """Ask the thread to finish (it records what is left, then ends); never blocks."""
        self._stop.set()
        self._gc.uninstall()

    @stops
    def close(self, timeout: float = 2.0) -> None:
        """Stop and wait up to ``timeout`` for the thread (use :meth:`aclose` on a loop)."""
        self._request_stop()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._finish()

    @astops
    async def aclose(self) -> None:
        """:meth:`close` for the loop thread: awaits the thread's end (at most 2 s) instead
        of joining it, so the loop keeps running meanwhile."""
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[None] = loop.create_future()
        with self._state:
            alive = self._thread is not None and not self._exited
            if alive:
                self._on_exit = lambda: loop.call_soon_threadsafe(_settle, ended)
        self._request_stop()
        if alive:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_CLOSE_TIMEOUT):
                    await ended
            thread = self._thread
            for _ in range(_EXIT_POLLS):  # it has said its last word: gone in microseconds
                if thread is None or not thread.is_alive():
                    break
                await asyncio.sleep(0.001)
        self._finish()


    def _finish(self) -> None:
        thread = self._thread
        if thread is not None and (self._exited or not thread.is_alive()):
            self._thread = None
        with self._state:
            reports = self._drain_ended(None)
        self._record_all(reports)

    @property
    def running(self) -> bool:
        """False once the thread has recorded its last report (it may take a moment more
        to leave ``threading.enumerate()``)."""
        return self._thread is not None and self._thread.is_alive() and not self._exited

    def _is_running(self) -> bool:
        return self.running

    @property
    def last_beat(self) -> float:
        """When the loop last beat (this watchdog's clock). A stall is known by it: two
        stalls a short gap apart are two however late a reader looks, one is one."""
        return self._last_beat

    @property
    def stalled_for(self) -> float:
        """Seconds the loop has been silent beyond its beat interval (0 when healthy)."""
        return max(0.0, self._clock() - self._last_beat - self.beat_interval)

    # --- watchdog thread ---
    def _run(self) -> None:
        try:
            try:
                self._open_probe()
            except Exception as exc:  # noqa: BLE001 - no readings: stacks and gc still work
                guard.absorb("stall_watchdog", exc, telemetry=self._telemetry)
            while not self._stop.wait(self._wait()):
                self.wakes += 1
                try:
                    self._check()
                except Exception as exc:  # noqa: BLE001 - the thread must outlive any bug
                    guard.absorb("stall_watchdog", exc, telemetry=self._telemetry)
            with self._state:
                reports = self._drain_ended(self._find_blocker)
            self._record_all(reports)
        except Exception as exc:  # noqa: BLE001
            guard.absorb("stall_watchdog", exc, telemetry=self._telemetry)
        finally:
            probe, self._probe = self._probe, None
            if probe is not None:
                probe.close()
            with self._state:
                self._exited = True
                on_exit, self._on_exit = self._on_exit, None
            if on_exit is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                    on_exit()

    def _open_probe(self) -> None:
        """Open the /proc and cgroup files and resolve the project roots: here, off the
        loop thread, once."""
        self.frame_filter = FrameFilter.resolved(self.project_roots)
        if self._loop_native is not None:
            self._probe = Probe(self._loop_native)
            self._threads.take(self._clock)
            self._read_sched()

    def _read_sched(self) -> Sched | None:
        """One reading of the loop thread's schedstat and the cgroup (watchdog thread)."""
        probe = self._probe
        if probe is None:
            return None
        sched = probe.read(self._clock())
        self._scheds.append(sched)
        return sched

    def _wait(self) -> float:
        try:
            return self._next_wait()
        except Exception as exc:  # noqa: BLE001 - e.g. an injected clock that raises
            guard.absorb("stall_watchdog", exc, telemetry=self._telemetry)
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
        self._read_sched()
        self._note_threads()
        with self._state:
            reports = self._drain_ended(self._find_blocker)
            pending = self._pending
            if pending is not None and self._last_beat > pending.at and not self._ended:
                self._pending = None  # the loop came back below the threshold: nothing to report
            elif pending is not None and len(pending.samples) < _MAX_SAMPLES:
                self._sample(pending)
            if self._pending is None and self.stalled_for >= self.threshold:
                self._catch()
            ongoing = self._progress()
        if ongoing is not None:
            self._announce(ongoing)
        self._record_all(reports)

    def _progress(self) -> StallReport | None:
        """The in-progress gauge follows the stall; past ``ongoing_after`` and then at
        doubling ages, a report of it as it is now. The caller holds _state."""
        pending = self._pending
        if pending is None or self._last_beat > pending.at or self._ended:
            self.ongoing = None
            self._set_in_progress(0.0)
            return None
        age = self.stalled_for
        self._set_in_progress(age)
        if age < max(self.ongoing_after, pending.next_report):
            return None
        pending.next_report = 2 * age
        pending.announced = True
        self.ongoing = self._ongoing_report(pending, age)
        return self.ongoing

    def _ongoing_report(self, pending: _Pending, age: float) -> StallReport:
        """What is known now, from the stack as it is (the call it is stuck in)."""
        assert self._loop_thread is not None
        frames = capture_thread(self._loop_thread) or pending.samples[-1]
        native = self._loop_native
        caught = Caught(samples=(frames,),
                        syscall=schedstat.syscall(native) if native else pending.syscall,
                        state=schedstat.state(native) if native else pending.state)
        why = attribute(age, None, caught, self.frame_filter, pending.blocker,
                        threshold=self.threshold)
        return StallReport(
            worker=self.worker, duration=age, ended_at=self._wall(), frames=frames,
            culprit=why.culprit, captured=True,
            detected_after=pending.at - (self._last_beat + self.beat_interval),
            cause=why.cause, summary=why.summary, evidence=why.evidence,
            project_frames=self.frame_filter.project_frames(frames),
            stack=tuple(self.frame_filter.trimmed(frames, self.stack_frames, why.culprit)),
            idle=self.frame_filter.is_idle(frames), blocker=why.blocker, ongoing=True,
            task=pending.task,
        )

    def _announce(self, report: StallReport) -> None:
        """Log an in-progress report now: never throttled (at most log2 of the stall's
        age of them), and for the ongoing listeners (a host's file, the gunicorn master)."""
        try:
            log.warning("%s", report.log_line(self.log_format),
                        extra={"corevo_stall": report.as_dict()})
        except Exception as exc:  # noqa: BLE001 - a broken log handler is the host's
            guard.absorb("stall_log", exc, telemetry=self._telemetry)
        for listener in _ongoing_listeners:
            try:
                listener(report)
            except Exception as exc:  # noqa: BLE001
                guard.absorb("stall_listener", exc, telemetry=self._telemetry)

    def _set_in_progress(self, age: float, *, force: bool = False) -> None:
        if age == self._in_progress_value and not force:
            return
        self._in_progress_value = age
        try:
            self._in_progress.set(age)
        except Exception as exc:  # noqa: BLE001 - a full metrics dir: counted, not raised
            guard.absorb("stall_metrics", exc, telemetry=self._telemetry)

    def _catch(self) -> None:
        """The loop is stalled now: take its stack, state and syscall; caller holds _state."""
        assert self._loop_thread is not None
        frames = capture_thread(self._loop_thread)
        if frames is None:
            return
        native = self._loop_native
        self._pending = _Pending(
            at=self._clock(), frames=frames, samples=[frames],
            state=schedstat.state(native) if native else None,
            syscall=schedstat.syscall(native) if native else None,
            # caught in the act: a thread holding the GIL may be gone by the report
            blocker=self._find_blocker() if native else None,
            task=self._held_task(),
        )

    def _held_task(self) -> HeldTask | None:
        try:
            return None if self._loop is None else held_task(self._loop)
        except Exception as exc:  # noqa: BLE001 - a report without the task, not no report
            guard.absorb("stall_task", exc, telemetry=self._telemetry)
            return None

    def _sample(self, pending: _Pending) -> None:
        assert self._loop_thread is not None
        frames = capture_thread(self._loop_thread)
        if frames is not None and frames != pending.samples[-1]:
            pending.samples.append(frames)

    def _drain_ended(self, find_blocker: _BlockerFinder | None = None
                     ) -> list[tuple[StallReport, bool]]:
        """Pair each ended stall with what was caught during it; the caller holds _state.

        The watchdog thread passes ``find_blocker`` (it reads /proc for a busy thread's
        stack); the loop thread's final drain passes None and touches no file.
        """
        reports: list[tuple[StallReport, bool]] = []
        found: list[BusyThread | None] = []

        def once() -> BusyThread | None:  # one look per batch: CPU since the last look
            if not found and find_blocker is not None:
                found.append(find_blocker())
            return found[0] if found else None

        while self._ended:
            woke, lag, before, after = self._ended.popleft()
            pending, self._pending = self._pending, None
            if pending is not None and pending.at > woke:
                self._pending, pending = pending, None  # belongs to a later stall
            report = self._report(woke, lag, before, after, pending,
                                  once if find_blocker is not None else None)
            reports.append((report, pending is not None and pending.announced))
        return reports

    def _find_blocker(self) -> BusyThread | None:
        exclude = [n for n in (self._loop_native, threading.get_native_id()) if n]
        return busiest_thread(self._threads, self._clock, exclude, self._thread_names)

    def _note_threads(self) -> None:
        """Remember thread names when the thread count changes (a len() otherwise), so a
        thread that held the GIL and ended before the report is still named."""
        count = threading.active_count()
        if count != self._thread_count:
            self._thread_count = count
            names = {native: name for native, name in schedstat.native_ids().values()}
            self._thread_names.update(names)
            if len(self._thread_names) > _NAMES_KEPT:
                self._thread_names = names

    def _report(self, woke: float, lag: float, before: Beat | None,
                after: Beat, pending: _Pending | None,
                find_blocker: _BlockerFinder | None) -> StallReport:
        frames = pending.frames if pending is not None else ()
        # the loop thread's drain (no find_blocker) touches no file: the plain filter
        ff = self.frame_filter if find_blocker is not None else self._plain_filter
        caught = Caught() if pending is None else Caught(
            samples=tuple(pending.samples), syscall=pending.syscall, state=pending.state)
        start = woke - lag
        scheds = list(self._scheds)
        sched_before = next((x for x in reversed(scheds) if x[0] <= start), None)
        sched_after = next((x for x in scheds if x[0] >= woke), None)
        if find_blocker is not None:  # the watchdog thread: a fresh reading is cheap
            sched_after = self._read_sched() or sched_after
        window = Window.between(before, after, sched_before, sched_after)
        if window is None:
            window = _gc_only(self._gc, woke - lag, woke)
        blocker = pending.blocker if pending is not None else None
        if (blocker is None and find_blocker is not None
                and may_be_gil(lag, window, caught, ff)):
            blocker = find_blocker()
        why = attribute(lag, window, caught, ff, blocker, threshold=self.threshold)
        evidence = list(why.evidence)
        if why.cause == "gc":
            evidence.extend(
                f"collection of generation {c.generation}: {c.seconds:.3f}s, "
                f"{c.collected} unreachable objects"
                for c in self._gc.during(woke - lag, woke)[-3:])
        culprit = why.culprit
        return StallReport(
            worker=self.worker,
            duration=lag,
            ended_at=self._wall() - (self._clock() - woke),
            frames=frames,
            culprit=culprit,
            captured=bool(frames),
            detected_after=None if pending is None else pending.at - (woke - lag),
            cause=why.cause,
            summary=why.summary,
            evidence=tuple(evidence),
            project_frames=ff.project_frames(frames),
            stack=tuple(ff.trimmed(frames, self.stack_frames, culprit)),
            idle=ff.is_idle(frames),
            blocker=why.blocker,
            measures=window.measures() if window is not None else {},
            task=None if pending is None else pending.task,
        )

    def _record_all(self, reports: list[tuple[StallReport, bool]]) -> None:
        """Outside _state: a slow listener (a py-spy capture) must not hold up stop()."""
        if reports:
            self._set_in_progress(0.0)
            for listener in _ongoing_listeners:  # the stall is over: nothing in progress
                try:
                    listener(None)
                except Exception as exc:  # noqa: BLE001
                    guard.absorb("stall_listener", exc, telemetry=self._telemetry)
        for report, announced in reports:
            self._record(report, announced)

    def _record(self, report: StallReport, announced: bool = False) -> None:
        self.reports.append(report)
        try:
            self._stalls.inc()
            # the stall's exemplar is the trace of the task that held the loop
            self._stall_seconds.observe(report.duration, _exemplar(report.task))
            self._by_cause[report.cause].inc()
        except Exception as exc:  # noqa: BLE001
            guard.absorb("stall_metrics", exc, telemetry=self._telemetry)
        try:
            self._log(report, announced)
        except Exception as exc:  # noqa: BLE001 - a broken log handler is the host's
            guard.absorb("stall_log", exc, telemetry=self._telemetry)
        for listener in self._listeners:
            try:
                listener(report)
            except Exception as exc:  # noqa: BLE001
                guard.absorb("stall_listener", exc, telemetry=self._telemetry)

    def _log(self, report: StallReport, announced: bool = False) -> None:
        """Throttled to one report per ``log_interval`` (the rest counted into the next),
        except the end of a stall that was announced while it lasted."""
        with self._state:
            now = self._clock()
            if now - self._last_log < self._log_interval and not announced:
                self._suppressed += 1
                return
            self._last_log = now
            suppressed, self._suppressed = self._suppressed, 0
        text = report.log_line(self.log_format)
        if suppressed and self.log_format == "text":
            first, _, rest = text.partition("\n")
            text = f"{first} ({suppressed} more since the last report)" + (
                f"\n{rest}" if rest else "")
        log.warning("%s", text, extra={"corevo_stall": report.as_dict()})


@dataclass
class _Pending:
    """A stall in progress as the watchdog caught it (first stack, later samples)."""

    at: float
    frames: tuple[FrameInfo, ...]
    samples: list[tuple[FrameInfo, ...]]
    state: str | None
    syscall: str | None
    blocker: BusyThread | None = None
    task: HeldTask | None = None
    next_report: float = 0.0  # the age at which the next in-progress report is due
    announced: bool = False


OngoingListener = Callable[["StallReport | None"], None]
#: process-wide: called on a watchdog thread with each in-progress report, and with None
#: when that stall ends (the gunicorn hooks keep the last one where the master reads it)
_ongoing_listeners: list[OngoingListener] = []


def add_ongoing_listener(listener: OngoingListener) -> None:
    """Hear every watchdog's in-progress reports in this process (and None at the end)."""
    if listener not in _ongoing_listeners:
        _ongoing_listeners.append(listener)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _gc_only(watch: GcWatch, start: float, end: float) -> Window:
    """Without beat readings (no probe yet): at least the collections seen in the stall."""
    seconds = sum(min(c.started + c.seconds, end) - max(c.started, start)
                  for c in watch.during(start, end))
    return Window(seconds=end - start, gc=max(0.0, seconds))


def _native_id(ident: int) -> int | None:
    if ident == threading.get_ident():
        return threading.get_native_id()
    for t in threading.enumerate():
        if t.ident == ident:
            return t.native_id
    return None
