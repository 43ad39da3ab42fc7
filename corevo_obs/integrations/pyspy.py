"""Native stacks with py-spy: locate the binary, dump a process within a time bound.

``dump(pid)`` runs ``py-spy dump --json --pid PID`` (never ``--locals``: stacks travel to
logs, so only code locations are taken), puts the event-loop thread first and marks its
innermost project frame. py-spy is optional and found lazily: ``$COREVO_PYSPY``, then next
to the running interpreter, then ``$PATH``.

Example::

    print(dump(4242, timeout=5).format())
    # process 4242: 3 threads
    # thread 4242 "MainThread" (event loop, blocked in time.sleep)
    #   app/store.py:15:_fetch  <-- innermost project frame
"""

from __future__ import annotations

import json
import keyword
import linecache
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from prometheus_client import CollectorRegistry

from ..core.errors import ConfigError, CorevoObsError
from ..core.guard import absorb
from ..core.settings import option, resolve
from ..loop.stacks import FrameInfo, innermost_project_frame
from ..loop.watchdog import StallReport, StallWatchdog

log = logging.getLogger("corevo_obs.integrations.pyspy")

__all__ = ["NativeStallCapture", "PySpyError", "PySpyNotFound", "PySpyPermissionError",
           "dump", "install_native_capture"]

ENV_PREFIX: Final = "COREVO"  # PySpySettings: $COREVO_PYSPY
CAPTURE_PREFIX: Final = "COREVO_PYSPY"  # CaptureSettings: $COREVO_PYSPY_MIN_STALL
PYSPY_ENV: Final = "COREVO_PYSPY"
DEFAULT_TIMEOUT: Final = 5.0
_LOOP_FUNCTIONS: Final = ("run_forever", "_run_once", "run_until_complete")


class PySpyError(CorevoObsError):
    """py-spy ran but could not produce a dump (process gone, not Python, timeout)."""


class PySpyNotFound(PySpyError):
    """No py-spy executable."""


class PySpyPermissionError(PySpyError):
    """The kernel refused ptrace: py-spy cannot read the target's memory."""


HINT_INSTALL: Final = f"pip install 'corevo-obs[pyspy]' or set ${PYSPY_ENV}"
HINT_PTRACE: Final = (
    "ptrace not permitted: run as the target's user with CAP_SYS_PTRACE "
    "(containers: --cap-add SYS_PTRACE) or set kernel.yama.ptrace_scope=0"
)


@dataclass(frozen=True)
class PySpySettings:
    """``$COREVO_PYSPY``: the py-spy executable to run (unset: searched)."""

    pyspy: str | None = option(None)


@dataclass(frozen=True)
class CaptureSettings:
    """``$COREVO_PYSPY_MIN_STALL``: seconds a stall lasts before it is dumped (0 = off)."""

    min_stall: float = option(0.0, minimum=0.0, maximum=3600)


def locate(
    explicit: str | None = None,
    *,
    on_bad_env: Callable[[ConfigError], None] | None = None,
) -> str:
    """The py-spy executable to run; ``PySpyNotFound`` names where it looked.

    An explicit path (argument, then ``$COREVO_PYSPY``) is the only candidate when given.
    A ``$COREVO_PYSPY`` that is no executable file is a ``ConfigError`` naming it, or,
    when ``on_bad_env`` is given (code running inside the host), handed to it and py-spy
    searched as if the variable were unset.
    """
    if explicit:
        if _runnable(explicit):
            return explicit
        raise PySpyNotFound(f"py-spy not found at {explicit!r}")
    try:
        chosen = _from_env()
    except ConfigError as exc:
        if on_bad_env is None:
            raise
        on_bad_env(exc)
        chosen = None
    if chosen:
        return chosen
    for c in (str(Path(sys.executable).parent / "py-spy"), shutil.which("py-spy") or ""):
        if c and _runnable(c):
            return c
    raise PySpyNotFound(f"py-spy not found ({HINT_INSTALL})")


def _from_env() -> str | None:
    path = resolve(PySpySettings, ENV_PREFIX).pyspy
    if path is not None and not _runnable(path):
        raise ConfigError(f"py-spy not found at {path!r} (not an executable file)",
                          source=f"${PYSPY_ENV}")
    return path


def _runnable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


@dataclass(frozen=True)
class ThreadStack:
    """One thread of a dump; frames outermost first, like a traceback."""

    thread_id: int
    name: str | None
    active: bool
    owns_gil: bool
    frames: tuple[FrameInfo, ...]
    native: frozenset[int] = frozenset()  # indexes of frames in C code (native mode)
    is_loop: bool = False
    culprit: FrameInfo | None = None

    @property
    def state(self) -> str:
        """What the thread does, from what py-spy gives. py-spy calls any thread in a
        blocking syscall "idle"; for a loop thread only the selector's wait is idle
        (waiting for I/O or a timer), anything else off the CPU is "blocked in" the call
        its innermost Python line makes (``time.sleep``), or in its native function."""
        if not self.is_loop:
            return "active" if self.active else "idle"
        python = [f for i, f in enumerate(self.frames) if i not in self.native]
        if python and _in_selector(python[-1]):
            return "idle, waiting in the selector"
        if self.active:
            return "running"
        return f"blocked in {self._blocking_call(python)}"

    def _blocking_call(self, python: Sequence[FrameInfo]) -> str:
        call = _called_on(python[-1]) if python else None
        if call:
            return call
        last_python = max((i for i, _ in enumerate(self.frames) if i not in self.native),
                          default=-1)
        native = [f.function for i, f in enumerate(self.frames)
                  if i in self.native and i > last_python]
        if native:
            return native[0]  # the outermost C function under the Python line
        return f"a call from {python[-1]}" if python else "a native call"

    def format(self) -> str:
        tags = ["event loop"] if self.is_loop else []
        tags.append(self.state)
        if self.owns_gil:
            tags.append("holds GIL")
        lines = [f'thread {self.thread_id} "{self.name or "?"}" ({", ".join(tags)})']
        for i, fi in enumerate(self.frames):
            where = f"{fi.function} ({Path(fi.filename).name})" if i in self.native else str(fi)
            mark = "  <-- innermost project frame" if fi == self.culprit else ""
            lines.append(f"  {where}{mark}")
        return "\n".join(lines)


@dataclass(frozen=True)
class ProcessDump:
    """All threads of one process, event-loop thread(s) first."""

    pid: int
    threads: tuple[ThreadStack, ...]

    @property
    def loop_thread(self) -> ThreadStack | None:
        return next((t for t in self.threads if t.is_loop), None)

    def format(self) -> str:
        head = f"process {self.pid}: {len(self.threads)} thread(s)"
        return "\n".join([head, *(t.format() for t in self.threads)])


_SELECTOR_WAITS: Final = frozenset({"select", "poll", "control"})
_CALL = re.compile(r"([A-Za-z_][\w.]*)\s*\(")


def _in_selector(frame: FrameInfo) -> bool:
    """The loop's wait for I/O or timers (``selectors.EpollSelector.select`` and kin)."""
    return (os.path.basename(frame.filename) == "selectors.py"
            and frame.function.rsplit(".", 1)[-1] in _SELECTOR_WAITS)


def _called_on(frame: FrameInfo) -> str | None:
    """The first call the frame's source line makes (``time.sleep``), when the file is
    readable here (a dump of a process on this host); None otherwise."""
    line = linecache.getline(frame.filename, frame.lineno)
    return next((m.group(1) for m in _CALL.finditer(line)
                 if not keyword.iskeyword(m.group(1))), None)


def _runs_loop(frames: Sequence[FrameInfo]) -> bool:
    return any(
        f.function.endswith(_LOOP_FUNCTIONS) and ("asyncio" in f.filename or "uvloop" in f.filename)
        for f in frames
    )


def _thread(raw: dict[str, Any], project_roots: Sequence[str]) -> ThreadStack:
    frames: list[FrameInfo] = []
    native: set[int] = set()
    raw_frames = list(reversed(raw.get("frames") or []))  # py-spy lists innermost first
    for i, f in enumerate(raw_frames):
        frames.append(FrameInfo(str(f.get("filename")), int(f.get("line") or 0), str(f["name"])))
        if f.get("module"):
            native.add(i)
    python_frames = [fi for i, fi in enumerate(frames) if i not in native]
    return ThreadStack(
        thread_id=int(raw.get("os_thread_id") or raw.get("thread_id") or 0),
        name=raw.get("thread_name"),
        active=bool(raw.get("active")),
        owns_gil=bool(raw.get("owns_gil")),
        frames=tuple(frames),
        native=frozenset(native),
        culprit=innermost_project_frame(python_frames, project_roots),
    )


def parse_dump(
    pid: int,
    text: str,
    *,
    loop_thread_id: int | None = None,
    project_roots: Iterable[str] = (),
) -> ProcessDump:
    """Parse ``py-spy dump --json`` output.

    ``loop_thread_id`` (a native thread id) names the loop thread when known; otherwise any
    thread inside an asyncio/uvloop ``run_forever`` counts, the main thread first.
    """
    try:
        raw = json.loads(text)
        if not isinstance(raw, list):
            raise ValueError("expected a list of threads")
        roots = tuple(project_roots)
        threads = [_thread(t, roots) for t in raw]
    except (ValueError, KeyError, TypeError) as exc:
        raise PySpyError(f"cannot parse py-spy output for pid {pid}: {exc}") from None
    marked = []
    for t in threads:
        is_loop = t.thread_id == loop_thread_id if loop_thread_id else _runs_loop(t.frames)
        marked.append(replace(t, is_loop=is_loop))
    marked.sort(key=lambda t: (not t.is_loop, t.thread_id != pid, t.thread_id))
    return ProcessDump(pid=pid, threads=tuple(marked))


def _failure(pid: int, stderr: str) -> PySpyError:
    text = stderr.strip()
    lowered = text.lower()
    if "permission denied" in lowered or "operation not permitted" in lowered:
        return PySpyPermissionError(f"py-spy cannot read pid {pid}: {HINT_PTRACE}")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    first = next((ln for ln in lines if ln.startswith("Error:")), lines[0] if lines else "")
    return PySpyError(f"py-spy failed on pid {pid}: {first.removeprefix('Error:').strip()}")


def dump(
    pid: int,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    native: bool = False,
    executable: str | None = None,
    loop_thread_id: int | None = None,
    project_roots: Iterable[str] = (),
) -> ProcessDump:
    """Run ``py-spy dump`` against ``pid``, killed after ``timeout`` seconds."""
    if pid <= 0:
        raise PySpyError(f"not a process id: {pid}")
    exe = locate(executable)
    cmd = [exe, "dump", "--json", "--pid", str(pid)]
    if native:
        cmd.append("--native")
    env = {**os.environ, "RUST_BACKTRACE": "0"}
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        raise PySpyError(f"py-spy did not finish within {timeout:g}s on pid {pid}") from None
    except OSError as exc:
        raise PySpyNotFound(f"cannot run {exe}: {exc.strerror}") from None
    if done.returncode != 0:
        raise _failure(pid, done.stderr or done.stdout)
    return parse_dump(
        pid, done.stdout, loop_thread_id=loop_thread_id, project_roots=project_roots
    )


@dataclass(frozen=True)
class NativeCapture:
    """A py-spy dump taken during a stall, paired with the watchdog's report when it ended."""

    stalled_for: float
    dump: ProcessDump
    report: StallReport | None = None

    def format(self) -> str:
        head = self.report.headline() if self.report else "event loop stall (still going)"
        loop = self.dump.loop_thread
        body = loop.format() if loop else self.dump.format()
        return f"{head}\nnative stack after {self.stalled_for:.3f}s:\n{body}"


class NativeStallCapture:
    """Dump this process with py-spy while its loop is stalled; off unless attached.

    A side thread polls ``watchdog.stalled_for``; once one stall has lasted ``min_stall``
    seconds it runs py-spy (killed after ``timeout``), at most once per ``min_interval``.
    A missing py-spy or a refused ptrace is logged once and disables the capture; a bad
    ``$COREVO_PYSPY`` met there is counted (in ``registry``, else under the watchdog's
    telemetry: its worker label and registry), logged once, and py-spy
    searched as if it were unset: the thread runs inside the host and never raises.
    Call :meth:`attach` on the loop thread (it records that thread's native id).

    Example: ``capture = NativeStallCapture(min_stall=1.0).attach(health.watchdog)``
    """

    def __init__(
        self,
        *,
        min_stall: float,
        min_interval: float = 60.0,
        timeout: float = 2.0,
        native: bool = True,
        executable: str | None = None,
        check_interval: float = 0.05,
        max_captures: int = 10,
        clock: Callable[[], float] = time.monotonic,
        registry: CollectorRegistry | None = None,
    ) -> None:
        if min_stall <= 0 or timeout <= 0:
            raise ConfigError("min_stall and timeout must be positive", source="NativeStallCapture")
        self.min_stall = min_stall
        self.min_interval = min_interval
        self.timeout = timeout
        self.native = native
        self.executable = executable
        self.check_interval = check_interval
        self.captures: deque[NativeCapture] = deque(maxlen=max_captures)
        self.disabled: str | None = None
        self.suppressed = 0
        self._clock = clock
        # where a bad $COREVO_PYSPY met on the thread is counted: this registry, else the
        # attached watchdog's telemetry (its worker label, its registry)
        self._registry = registry
        self._last = float("-inf")
        self._pending: tuple[float, NativeCapture] | None = None
        self._last_report: StallReport | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watchdog: StallWatchdog | None = None
        self._loop_tid = 0

    def attach(
        self, watchdog: StallWatchdog, *, loop_thread_id: int | None = None
    ) -> NativeStallCapture:
        self._watchdog = watchdog
        self._loop_tid = loop_thread_id or threading.get_native_id()
        watchdog.add_listener(self._on_report)
        self._thread = threading.Thread(
            target=self._run, name=f"corevo-pyspy[{watchdog.worker}]", daemon=True
        )
        self._thread.start()
        return self


    def __enter__(self) -> NativeStallCapture:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self, timeout: float | None = None) -> None:
        """Stop capturing and join the capture thread; safe to call twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.timeout + 1 if timeout is None else timeout)

    def _run(self) -> None:
        # one capture per stall, a stall known by the beat before it: a gap between two
        # stalls shorter than a capture (py-spy runs for a while) still makes two
        captured: float | None = None
        watchdog = self._watchdog
        assert watchdog is not None
        while not self._stop.wait(self.check_interval) and self.disabled is None:
            beat = watchdog.last_beat  # before stalled_for: a beat between reads is no stall
            stalled = watchdog.stalled_for if watchdog.running else 0.0
            if stalled >= self.min_stall and beat != captured:
                captured = beat
                self._capture(stalled)

    def _capture(self, stalled: float) -> None:
        now = self._clock()
        if now - self._last < self.min_interval:
            self.suppressed += 1
            return
        self._last = now
        started = time.time()
        try:
            d = dump(
                os.getpid(), self.timeout, native=self.native,
                executable=locate(self.executable, on_bad_env=self._bad_env),
                loop_thread_id=self._loop_tid,
            )
        except (PySpyNotFound, PySpyPermissionError) as exc:
            self.disabled = str(exc)
            log.warning("corevo-obs native stall capture disabled: %s", exc)
            return
        except PySpyError as exc:
            log.warning("corevo-obs native stall capture failed: %s", exc)
            return
        with self._lock:
            self._pending = (started, NativeCapture(stalled_for=stalled, dump=d))
            report = self._last_report  # the stall may have ended while py-spy ran
        if report is not None:
            self._pair(report)

    def _bad_env(self, exc: ConfigError) -> None:
        # on the capture thread, inside the host: counted and logged once, then searched
        watchdog = self._watchdog
        if watchdog is not None and self._registry is None:
            absorb("pyspy-config", exc, worker=watchdog.worker, registry=watchdog.registry)
            return
        worker = watchdog.worker if watchdog is not None else "unknown"
        absorb("pyspy-config", exc, worker=worker, registry=self._registry)

    def _on_report(self, report: StallReport) -> None:
        with self._lock:
            self._last_report = report
        self._pair(report)

    def _pair(self, report: StallReport) -> None:
        """Finish the pending capture if it was taken during ``report``'s stall."""
        with self._lock:
            pending = self._pending
            if pending is None:
                return
            started, capture = pending
            if not report.ended_at - report.duration - 0.1 <= started <= report.ended_at:
                return
            self._pending = None
        done = replace(capture, report=report)
        self.captures.append(done)
        log.warning("%s", done.format(), extra={"corevo_native_stall": report.as_dict()})


def install_native_capture(
    watchdog: StallWatchdog | None, *, min_stall: float | None = None, **options: Any
) -> NativeStallCapture | None:
    """Attach a capture when ``min_stall`` or ``$COREVO_PYSPY_MIN_STALL`` is set (> 0).

    A call the user makes at start-up: a bad ``$COREVO_PYSPY_MIN_STALL`` or ``$COREVO_PYSPY``
    (or ``min_stall`` keyword) is a ``ConfigError`` naming it, raised here.
    """
    settings = resolve(CaptureSettings, CAPTURE_PREFIX, caller="install_native_capture",
                       min_stall=min_stall)
    if watchdog is None or settings.min_stall <= 0:
        return None
    if options.get("executable") is None:
        _from_env()
    return NativeStallCapture(min_stall=settings.min_stall, **options).attach(watchdog)
