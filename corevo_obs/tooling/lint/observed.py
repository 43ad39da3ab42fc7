"""Blocking facts learned in production: ``corevo-obs lint --observed FILE...``.

The watchdog catches a stalled loop in the act and logs its stack (docs/loop-health.md):
the innermost frame that is a sync function of the linted tree blocked the loop, even when
it did so in C code the catalog does not know. That function becomes a blocking fact for
this run, so every *other* ``async def`` that calls it (directly or through helpers) is a
COB110 finding citing the stall (where, how long, when).

Accepted inputs, any mix, one file each:

- the watchdog's log text and the pytest probe's failure output: a headline
  ``... stalled 0.412s at file:line:function`` followed by ``project frames (innermost
  last):`` lines;
- JSON lines with ``"event": "stall"`` (or a ``duration_seconds``) and ``"frames"`` (or
  ``"project_frames"``, or a ``"culprit"``): ``["file:line:function", ...]``, innermost last;
- the load-test tool's JSON report (its ``"stalls"``: file, line, function per stall).

The tooling may not import the runtime (lint-imports), so the formats are read here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePath
from typing import Any

from ...core.errors import ConfigError
from ...core.fileio import read_regular
from ...core.nesting import loads_json

_HEADLINE = re.compile(r"stalled (?P<duration>[0-9.]+)s at (?P<where>\S+:\d+:[\w<>.]+)")
_FRAME = re.compile(r"^\s+(?P<file>\S.*?):(?P<line>\d+):(?P<function>[\w<>.]+)\s*$")
_STAMP = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?")


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str

    @classmethod
    def parse(cls, text: str) -> Frame | None:
        file, _, rest = str(text).rpartition(":")
        file, _, line = file.rpartition(":")
        if not file or not line.isdigit() or not rest:
            return None
        return cls(file, int(line), rest)

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.function}"


@dataclass(frozen=True)
class Stall:
    """One stall seen at run time: its stack (outermost first), duration, when."""

    frames: tuple[Frame, ...]
    duration: float
    when: str
    origin: str  # report file:line, where this stall was read

    def cite(self, frame: Frame) -> str:
        when = f", {self.when}" if self.when else ""
        return f"observed stall {self.duration:.3f}s at {frame}{when} ({self.origin})"


def load_stalls(paths: Sequence[str]) -> list[Stall]:
    """Every stall in these reports; a file that cannot be read or holds none is an error."""
    out: list[Stall] = []
    for path in paths:
        try:
            text = read_regular(path).decode("utf-8", "replace")
        except OSError as exc:
            raise ConfigError(f"cannot read stall report: {exc.strerror or exc}",
                              source=path) from None
        found = list(_parse(text, path))
        if not found:
            raise ConfigError("no stall found (watchdog log, stall JSON lines, load-test "
                              "JSON report or pytest probe output expected)", source=path)
        out.extend(found)
    return out


def _parse(text: str, path: str) -> Iterator[Stall]:
    try:
        whole = loads_json(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict) and isinstance(whole.get("stalls"), list):  # load-test report
        for i, s in enumerate(whole["stalls"]):
            stall = _from_json(s, f"{path} stalls[{i}]") if isinstance(s, dict) else None
            if stall is not None:
                yield stall
        return
    current: list[Any] | None = None  # [frames, duration, when, origin] of a text stall
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("{"):
            try:
                item = loads_json(line)
            except ValueError:
                item = None
            stall = _from_json(item, f"{path}:{n}") if isinstance(item, dict) else None
            if stall is not None:
                yield stall
                continue
        head = _HEADLINE.search(line)
        if head is not None:
            if current is not None:
                yield _from_text(current)
            stamp = _STAMP.search(line[:head.start()])
            current = [[], float(head["duration"]), stamp.group(0) if stamp else "",
                       f"{path}:{n}", Frame.parse(head["where"])]
            continue
        frame = _FRAME.match(line) if current is not None else None
        if frame is not None and current is not None:
            current[0].append(Frame(frame["file"], int(frame["line"]), frame["function"]))
        elif current is not None and line.strip() and not line.startswith(" "):
            yield _from_text(current)
            current = None
    if current is not None:
        yield _from_text(current)


def _from_text(current: list[Any]) -> Stall:
    frames, duration, when, origin, culprit = current
    if culprit is not None and (not frames or frames[-1] != culprit):
        frames = [*frames, culprit]  # the headline names the innermost project frame
    return Stall(tuple(frames), duration, when, origin)


def _from_json(item: Mapping[str, Any], origin: str) -> Stall | None:
    """A stall from one JSON object, or None when the object is not one."""
    event = str(item.get("event", ""))
    duration = item.get("duration_seconds", item.get("duration"))
    if "stall" not in event and duration is None:
        return None
    raw = item.get("frames") or item.get("project_frames") or []
    frames = [f for f in (Frame.parse(x) for x in raw if isinstance(x, str)) if f is not None]
    found = item.get("culprit")
    culprit: Mapping[str, Any] = found if isinstance(found, dict) else item
    if not frames and culprit.get("file") and isinstance(culprit.get("line"), int):
        frames = [Frame(str(culprit["file"]), culprit["line"], str(culprit.get("function")))]
    if not frames or not isinstance(duration, int | float):
        return None
    return Stall(tuple(frames), float(duration), _when(item), origin)


def _when(item: Mapping[str, Any]) -> str:
    for key in ("when", "time", "ts", "timestamp", "ended_at"):
        value = item.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, int | float) and value > 1e9:  # wall-clock seconds
            return datetime.fromtimestamp(value, UTC).isoformat(timespec="seconds")
    if isinstance(item.get("at_seconds"), int | float):
        return f"{item['at_seconds']}s into the load test"
    return ""


class FrameIndex:
    """Sync functions of the tree by (function name, file name), to place a frame."""

    def __init__(self, funcs: Iterable[tuple[str, str, str, int]]) -> None:
        # (qualname, display name, path, def line)
        self._by: dict[tuple[str, str], list[tuple[str, tuple[str, ...], int]]] = {}
        for qualname, name, path, line in funcs:
            parts = Path(path).resolve().parts
            self._by.setdefault((name.rpartition(".")[2], parts[-1]), []).append(
                (qualname, parts, line))

    def place(self, frame: Frame) -> str | None:
        """The function a frame runs in: same name and file name, the longest common path
        tail (a production checkout lives elsewhere), the nearest def above the line."""
        parts = PurePath(frame.file).parts
        if not parts:
            return None
        best: tuple[int, int, str] | None = None
        for qualname, path, line in self._by.get((frame.function, parts[-1]), ()):
            if line > frame.line:
                continue
            tail = 0
            while tail < min(len(parts), len(path)) and parts[-1 - tail] == path[-1 - tail]:
                tail += 1
            if best is None or (tail, line) > best[:2]:
                best = (tail, line, qualname)
        return best[2] if best is not None else None


def blocking_facts(stalls: Iterable[Stall], index: FrameIndex) -> tuple[dict[str, str],
                                                                       list[Stall]]:
    """qualname -> the citation of the longest stall seen in it (its innermost frame that
    is a sync function of the tree), and the stalls that matched no such function."""
    facts: dict[str, tuple[float, str]] = {}
    unmatched: list[Stall] = []
    for stall in stalls:
        for frame in reversed(stall.frames):
            qualname = index.place(frame)
            if qualname is not None:
                if qualname not in facts or facts[qualname][0] < stall.duration:
                    facts[qualname] = (stall.duration, stall.cite(frame))
                break
        else:
            unmatched.append(stall)
    return {q: cite for q, (_, cite) in facts.items()}, unmatched
