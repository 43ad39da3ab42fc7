"""Capture another thread's Python stack as file:line:function, never local variables.

Stall reports travel to logs, monitors and metrics dashboards; locals could carry user
data or secrets, so only code locations are ever taken from a frame.
"""

from __future__ import annotations

import sys
import sysconfig
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

_SUITE_DIR = str(Path(__file__).resolve().parent.parent) + "/"
_SUITE_HOST_DIRS = (_SUITE_DIR + "demo/",)  # the demo is a host app, its frames are "project"


def _library_prefixes() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    found = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    found.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    return tuple(sorted(str(Path(p).resolve()) + "/" for p in found))


_LIBRARY_PREFIXES = _library_prefixes()


@dataclass(frozen=True, slots=True)
class FrameInfo:
    filename: str
    lineno: int
    function: str

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno}:{self.function}"


def frames_of(frame: FrameType | None, limit: int = 128) -> tuple[FrameInfo, ...]:
    """Walk outward from ``frame``; return outermost first, innermost last (traceback order)."""
    out: list[FrameInfo] = []
    while frame is not None and len(out) < limit:
        code = frame.f_code
        out.append(FrameInfo(code.co_filename, frame.f_lineno or 0, code.co_name))
        frame = frame.f_back
    out.reverse()
    return tuple(out)


def capture_thread(thread_id: int, limit: int = 128) -> tuple[FrameInfo, ...] | None:
    """The current stack of a running thread, or None if the thread is gone."""
    frame = sys._current_frames().get(thread_id)
    return None if frame is None else frames_of(frame, limit)


def is_library_file(filename: str) -> bool:
    """True for the stdlib, installed packages, frozen modules and the suite's own code."""
    if filename.startswith("<"):
        return True
    try:
        resolved = str(Path(filename).resolve())
    except (OSError, ValueError):
        return True
    if resolved.startswith(_SUITE_HOST_DIRS):
        return False
    if resolved.startswith(_SUITE_DIR):
        return True
    return resolved.startswith(_LIBRARY_PREFIXES)


def innermost_project_frame(
    frames: Sequence[FrameInfo], project_roots: Iterable[str] = ()
) -> FrameInfo | None:
    """The deepest frame of the host's own code: what a human should open first.

    With ``project_roots`` only files under those paths count (useful when the app itself
    is installed into site-packages); otherwise anything that is not library code.
    """
    roots = tuple(str(Path(r).resolve()) + "/" for r in project_roots)
    for fi in reversed(frames):
        if roots:
            if str(Path(fi.filename).resolve()).startswith(roots):
                return fi
        elif not is_library_file(fi.filename):
            return fi
    return None
