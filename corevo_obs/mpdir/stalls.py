"""The stall a worker is in now, kept where the process that supervises it can read it.

A worker whose loop stays frozen may be killed before it can say anything (gunicorn's
worker timeout sends SIGABRT, which a uvicorn worker does not catch). Its watchdog
thread still runs during the freeze, so it writes each in-progress report to
``.corevo/stalls/<pid>.json`` in the multiprocess directory; the master reads it when it
reaps a worker it killed, and the file goes when the stall ends or the worker is reaped.

The directory is shared with every process that can write it, so what the master reads
is hostile input: no link followed, a regular file of bounded size, a JSON object whose
fields are checked one by one (a bad file is "no report", never an exception), control
characters in its text escaped.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..core.untrusted import printable
from .layout import STATE_DIR
from .safe import ensure_subdir, open_dir_at, read_regular, replace_file, unlink_quiet

STALLS_DIR: Final = "stalls"
MAX_BYTES: Final = 64 << 10
_FRAMES_KEPT: Final = 32
_TEXT_MAX: Final = 500


@dataclass(frozen=True)
class OngoingStall:
    """What a frozen worker last said about its stall (code locations only)."""

    pid: int
    worker: str
    seconds: float
    reported_at: float
    cause: str
    where: str
    project_frames: tuple[str, ...] = ()

    def describe(self) -> str:
        """``stalled 29.9s at app.py:12:handler [blocking]``, then its project frames."""
        lines = [f"its event loop was stalled {self.seconds:.1f}s at {self.where} "
                 f"[{self.cause}]"]
        if self.project_frames:
            lines.append("  project frames (innermost last):")
            lines.extend(f"    {f}" for f in self.project_frames)
        return "\n".join(lines)


def _name(pid: int) -> str:
    return f"{pid}.json"


def _stalls_fd(directory: Path, *, create: bool) -> int:
    where = str(directory / STATE_DIR / STALLS_DIR)
    root = open_dir_at(None, directory, str(directory))
    try:
        state = ensure_subdir(root, STATE_DIR, str(directory / STATE_DIR)) if create else \
            open_dir_at(root, STATE_DIR, str(directory / STATE_DIR))
        try:
            return ensure_subdir(state, STALLS_DIR, where) if create else \
                open_dir_at(state, STALLS_DIR, where)
        finally:
            os.close(state)
    finally:
        os.close(root)


def write_ongoing(directory: Path, report: dict[str, Any]) -> None:
    """Keep ``report`` (a ``StallReport.as_dict()``) as this process's stall now."""
    keep = {
        "pid": os.getpid(),
        "worker": str(report.get("worker", "")),
        "seconds": report.get("duration_seconds"),
        "reported_at": report.get("ended_at"),
        "cause": report.get("cause"),
        "where": _where(report.get("culprit")),
        "project_frames": list(report.get("project_frames", ()))[-_FRAMES_KEPT:],
    }
    data = json.dumps(keep).encode()[:MAX_BYTES]
    fd = _stalls_fd(directory, create=True)
    try:
        replace_file(fd, _name(os.getpid()), data, str(directory / STATE_DIR / STALLS_DIR))
    finally:
        os.close(fd)


def clear_ongoing(directory: Path, pid: int | None = None) -> None:
    """The stall of ``pid`` (default: this process) is over, or the process is gone."""
    try:
        fd = _stalls_fd(directory, create=False)
    except FileNotFoundError:
        return
    try:
        unlink_quiet(fd, _name(os.getpid() if pid is None else pid))
    finally:
        os.close(fd)


def read_ongoing(directory: Path, pid: int) -> OngoingStall | None:
    """The last in-progress report of ``pid``, or None (none, or not one the suite wrote)."""
    try:
        fd = _stalls_fd(directory, create=False)
    except OSError:
        return None
    try:
        raw = read_regular(fd, _name(pid), str(directory / STATE_DIR / STALLS_DIR),
                           limit=MAX_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return _parse(data, pid)


def _where(culprit: object) -> str:
    if isinstance(culprit, dict):
        return f"{culprit.get('file')}:{culprit.get('line')}:{culprit.get('function')}"
    return "no project frame"


def _text(value: object) -> str | None:
    """A string field, cut and with its control characters escaped (a newline would let
    the writer of the file forge whole lines in the master's log)."""
    return printable(value[:_TEXT_MAX]) if isinstance(value, str) else None


def _number(value: object) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def _parse(data: object, pid: int) -> OngoingStall | None:
    if not isinstance(data, dict) or data.get("pid") != pid:
        return None
    worker, cause, where = _text(data.get("worker")), _text(data.get("cause")), \
        _text(data.get("where"))
    seconds, at = _number(data.get("seconds")), _number(data.get("reported_at"))
    frames = data.get("project_frames")
    if None in (worker, cause, where, seconds, at) or not isinstance(frames, list):
        return None
    assert worker is not None and cause is not None and where is not None
    assert seconds is not None and at is not None
    kept = tuple(t for t in map(_text, frames[-_FRAMES_KEPT:]) if t is not None)
    return OngoingStall(pid, worker, seconds, at, cause, where, kept)
