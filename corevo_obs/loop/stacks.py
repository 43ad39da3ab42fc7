"""Capture another thread's Python stack as file:line:function, never local variables.

Stall reports travel to logs, monitors and metrics dashboards; locals could carry user
data or secrets, so only code locations are ever taken from a frame.

Which frames are "the host's own code" is decided by a :class:`FrameFilter` built once.
The plain constructor classifies by string prefixes only (no filesystem call: safe on the
loop thread); :meth:`FrameFilter.resolved`, built and used off the loop (the watchdog's
thread, a dump), also resolves each file with ``os.path.realpath`` and looks on disk for
the venv it sits in (``app/../venv/bin/gunicorn`` through a symlinked ``app`` is the
venv's script, not the host's code). Both cache per file name.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from types import FrameType
from typing import Final, Literal

Kind = Literal["project", "library", "import"]

_SUITE_DIR: Final = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_CACHE_MAX: Final = 4096
# the loop's own wait for I/O or timers: a thread whose innermost frame is one of these
# is idle (or waiting to get the CPU or the GIL back), not running the host's code
_IDLE: Final = frozenset({
    ("selectors.py", "select"), ("base_events.py", "_run_once"),
    ("base_events.py", "run_forever"), ("base_events.py", "run_until_complete"),
    ("runners.py", "run"),
})


def _given(path: str) -> str:
    return os.path.abspath(path).rstrip(os.sep) + os.sep


def _forms(path: str) -> set[str]:
    """The spellings a frame's filename may use for a directory: as given and resolved."""
    out = {_given(path)}
    try:
        out.add(os.path.realpath(path).rstrip(os.sep) + os.sep)
    except (OSError, ValueError):
        pass
    return out


def _interpreter_prefixes() -> tuple[str, ...]:
    """The venv this interpreter runs in (its scripts, e.g. ``bin/gunicorn``, and its
    packages): never the host's code, even when the venv sits inside the project. Not
    the base install's prefix: ``/usr`` or ``/usr/local`` may hold the app itself."""
    found = {p for p in (sys.prefix, sys.exec_prefix)
             if p and p not in (sys.base_prefix, sys.base_exec_prefix)}
    return tuple(sorted(f for p in found for f in _forms(p)))


def venv_root(directory: str, cache: dict[str, str]) -> str:
    """The venv (a directory holding ``pyvenv.cfg``) ``directory`` is in, or "";
    ``cache`` remembers every directory looked at (filesystem calls: off the loop)."""
    found = cache.get(directory)
    if found is None:
        parent = os.path.dirname(directory)
        if os.path.isfile(os.path.join(directory, "pyvenv.cfg")):
            found = directory
        elif parent and parent != directory:
            found = venv_root(parent, cache)
        else:
            found = ""
        if len(cache) >= _CACHE_MAX:
            cache.clear()
        cache[directory] = found
    return found


_PACKAGE_DIRS: Final = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")


def _library_prefixes() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    found = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    found.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    found.add(_SUITE_DIR)  # the suite's own code is library code to its users
    return tuple(sorted(f for p in found for f in _forms(p)))


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


def _is_import_machinery(filename: str) -> bool:
    return filename.startswith("<frozen importlib") or (
        "importlib" in filename and os.path.basename(filename).startswith("_bootstrap"))


class FrameFilter:
    """Tells the host's frames from library and import-machinery frames.

    With ``project_roots`` only files under those directories are the host's (the way to
    say so when the app is installed into site-packages, or is a demo inside this
    package); without, anything that is neither the stdlib, an installed package, a
    frozen module nor this suite. The constructor takes the roots as spelled (no
    filesystem call, so it is safe on the loop thread); :meth:`resolved` also matches
    them and each file with symlinks resolved and finds venvs on disk, and is what to
    build once, off the loop.
    """

    def __init__(self, project_roots: Iterable[str] = (), *,
                 spellings: Iterable[str] | None = None) -> None:
        self.project_roots = tuple(project_roots)
        given = spellings if spellings is not None else map(_given, self.project_roots)
        self._roots = tuple(sorted(set(given)))
        self._library = _LIBRARY_PREFIXES
        self._kinds: dict[str, Kind] = {}

    @classmethod
    def resolved(cls, project_roots: Iterable[str] = ()) -> FrameFilter:
        """Roots and frame files with symlinks resolved, venvs found on disk: build and
        use it off the loop thread."""
        roots = tuple(project_roots)
        return _OnDiskFilter(roots, spellings=[f for r in roots for f in _forms(r)])

    def kind(self, filename: str) -> Kind:
        found = self._kinds.get(filename)
        if found is None:
            found = self._classify(filename)
            if len(self._kinds) >= _CACHE_MAX:
                self._kinds.clear()
            self._kinds[filename] = found
        return found

    def _classify(self, filename: str) -> Kind:
        if _is_import_machinery(filename):
            return "import"
        if filename.startswith("<"):
            return "library"
        path, venv = self._located(
            filename if os.path.isabs(filename) else os.path.abspath(filename))
        if self._roots:
            # the deeper of the two wins: a venv inside the project is not the project,
            # a project root inside an installed package (the suite's demo) still is
            root = max((r for r in self._roots if path.startswith(r)), key=len, default="")
            return "project" if root and len(root) >= len(venv) else "library"
        if venv or path.startswith(self._library):
            return "library"
        return "project"

    def _located(self, path: str) -> tuple[str, str]:
        """The path to classify and the interpreter tree it is in (see _venv_prefix)."""
        return path, self._venv_prefix(path)

    def _venv_prefix(self, path: str) -> str:
        """The longest prefix of ``path`` that is an interpreter's tree: this
        interpreter's prefixes (its venv too) or a ``site-packages`` directory. By string
        only: classifying runs on the loop thread too."""
        found = max((p for p in _INTERPRETER_PREFIXES if path.startswith(p)), key=len,
                    default="")
        for marker in _PACKAGE_DIRS:
            at = path.rfind(marker)
            if at >= 0 and at + len(marker) > len(found):
                found = path[:at + len(marker)]
        return found

    def is_project(self, filename: str) -> bool:
        return self.kind(filename) == "project"

    def project_frames(self, frames: Sequence[FrameInfo]) -> tuple[FrameInfo, ...]:
        return tuple(f for f in frames if self.kind(f.filename) == "project")

    def innermost_project_frame(self, frames: Sequence[FrameInfo]) -> FrameInfo | None:
        """The deepest frame of the host's own code: what a human should open first."""
        for fi in reversed(frames):
            if self.kind(fi.filename) == "project":
                return fi
        return None

    def importing_frame(self, frames: Sequence[FrameInfo]) -> FrameInfo | None:
        """For a stack inside an import: the host's frame that ran the import statement
        (the innermost project frame outside the import machinery), else None."""
        first = next((i for i, f in enumerate(frames) if self.kind(f.filename) == "import"),
                     None)
        if first is None:
            return None
        return self.innermost_project_frame(frames[:first])

    def imported_module(self, frames: Sequence[FrameInfo]) -> FrameInfo | None:
        """The module body being executed by an import in this stack (innermost one)."""
        first = next((i for i, f in enumerate(frames) if self.kind(f.filename) == "import"),
                     None)
        if first is None:
            return None
        return next((f for f in reversed(frames[first:]) if f.function == "<module>"), None)

    def is_idle(self, frames: Sequence[FrameInfo]) -> bool:
        """True when the innermost frame is the event loop's own wait (its selector)."""
        if not frames:
            return False
        inner = frames[-1]
        return (self.kind(inner.filename) == "library"
                and (os.path.basename(inner.filename), inner.function) in _IDLE)

    def trimmed(self, frames: Sequence[FrameInfo], innermost: int,
                mark: FrameInfo | None = None) -> list[str]:
        """The stack for a human: the host's frames; below the innermost of them, the
        last ``innermost`` frames as they are (the call that blocks); every other run of
        library or import-machinery frames folded into one line, and a recursion's
        repeated frame into one."""
        kinds = [self.kind(f.filename) for f in frames]
        last_project = max((i for i, k in enumerate(kinds) if k == "project"), default=-1)
        cut = max(last_project + 1, len(frames) - innermost)
        lines: list[str] = []
        run: list[tuple[Kind, FrameInfo]] = []
        repeats = 0

        def flush() -> None:
            nonlocal repeats
            if repeats:
                lines.append(f"… the frame above {repeats} more time{'s' * (repeats > 1)} …")
                repeats = 0
            if len(run) == 1:
                lines.append(str(run[0][1]))
            elif run:
                noun = "import-machinery" if run[0][0] == "import" else "library"
                lines.append(f"… {len(run)} {noun} frames …")
            run.clear()

        previous: FrameInfo | None = None
        for i, (fi, kind) in enumerate(zip(frames, kinds, strict=True)):
            if i < cut and kind != "project":
                if repeats or (run and run[0][0] != kind):
                    flush()
                run.append((kind, fi))
                previous = None
            elif i < cut and fi == previous and not run:
                repeats += 1
            else:
                flush()
                lines.append(f"{fi} <-- innermost project frame" if fi == mark else str(fi))
                previous = fi
        flush()
        return lines


class _OnDiskFilter(FrameFilter):
    """:meth:`FrameFilter.resolved`: each file by its real path, and the venv it is in
    found on disk (``pyvenv.cfg``) as well as by prefix. Filesystem calls (once per file
    name): used off the loop thread only."""

    def __init__(self, project_roots: Iterable[str] = (), *,
                 spellings: Iterable[str] | None = None) -> None:
        super().__init__(project_roots, spellings=spellings)
        self._venvs: dict[str, str] = {}

    def _located(self, path: str) -> tuple[str, str]:
        real = os.path.realpath(path)
        disk = venv_root(os.path.dirname(real), self._venvs)
        return real, max(self._venv_prefix(real), disk and disk + os.sep, key=len)


_LIBRARY_PREFIXES: Final = _library_prefixes()
_INTERPRETER_PREFIXES: Final = _interpreter_prefixes()


@lru_cache(maxsize=32)
def frame_filter(project_roots: tuple[str, ...] = ()) -> FrameFilter:
    """A shared filter per set of roots (each builds its prefixes once)."""
    return FrameFilter.resolved(project_roots)


def innermost_project_frame(
    frames: Sequence[FrameInfo], project_roots: Iterable[str] = ()
) -> FrameInfo | None:
    """The deepest frame of the host's own code (see :class:`FrameFilter`)."""
    return frame_filter(tuple(project_roots)).innermost_project_frame(frames)
