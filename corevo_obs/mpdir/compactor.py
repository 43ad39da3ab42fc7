"""Fold dead writers' files into one accumulator per file type, in prometheus_client's format.

What survives, per file type (see docs/multiprocess-compaction.md):

- counter, histogram, summary, ``gauge_sum``: values of the same key are added;
- ``gauge_max`` / ``gauge_min``: the max / min is kept;
- ``gauge_mostrecent``: the value with the newest timestamp is kept;
- ``gauge_live*`` and ``gauge_all``: dropped (a dead process has no live value, and
  pid-labelled series of dead pids are stale and unbounded).

Because the collector sums, maxes, mins or picks the newest across files with exactly
these rules, folding files into one before it reads them changes nothing it reports.
The accumulator is written with prometheus_client's own ``MmapedDict``, so any
unmodified ``MultiProcessCollector`` reads it as one more writer.
"""

from __future__ import annotations

import json
import os
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from prometheus_client.mmap_dict import MmapedDict

from .errors import CompactionError
from .journal import commit, empty_trash, remove_debris, roll_forward
from .layout import (
    TMP_SUFFIX,
    MetricFile,
    accumulator_path,
    metric_files,
    state_dir,
    writer_record_path,
)
from .lock import dir_lock
from .stats import record_compaction
from .writers import Liveness, liveness, recorded_pids

DEFAULT_MAX_WRITERS: Final = 256
Entries = dict[str, tuple[float, float]]  # mmap key -> (value, timestamp)
_CORRUPT = (RuntimeError, struct.error, UnicodeDecodeError, ValueError, IndexError)


@dataclass
class CompactionResult:
    """What one compaction did; ``unreadable`` files were left in place, untouched."""

    dead_writers: dict[int, Liveness] = field(default_factory=dict)
    folded_files: int = 0
    dropped_files: int = 0
    accumulators: int = 0
    unreadable: list[str] = field(default_factory=list)
    recovered: bool = False
    seconds: float = 0.0
    pending: int = 0  # dead writers left for the next compaction (``max_writers``)

    def add(self, later: CompactionResult) -> None:
        """Account for a later batch of the same backlog."""
        self.dead_writers.update(later.dead_writers)
        self.folded_files += later.folded_files
        self.dropped_files += later.dropped_files
        self.accumulators = max(self.accumulators, later.accumulators)
        self.unreadable += later.unreadable
        self.recovered = self.recovered or later.recovered
        self.seconds += later.seconds
        self.pending = later.pending


def read_entries(path: Path) -> Entries:
    """All (key -> value, timestamp) of one file; raises on a corrupt file."""
    out: Entries = {}
    if os.path.getsize(path) == 0:
        return out  # created, not yet sized by its writer: nothing written yet
    for key, value, ts, _pos in MmapedDict.read_all_values_from_file(str(path)):
        parsed = json.loads(key)
        if not isinstance(parsed, list) or len(parsed) != 4:
            raise ValueError(f"unexpected key {key[:80]!r}")
        out[key] = (value, ts)
    return out


def fold(rule: str, into: Entries, entries: Entries) -> None:
    """Merge ``entries`` into ``into`` the way MultiProcessCollector merges across files."""
    for key, (value, ts) in entries.items():
        old = into.get(key)
        if old is None:
            into[key] = (value, ts)
        elif rule == "sum":
            into[key] = (old[0] + value, max(old[1], ts))
        elif rule == "max":
            if value > old[0]:
                into[key] = (value, ts)
        elif rule == "min":
            if value < old[0]:
                into[key] = (value, ts)
        elif ts > old[1]:  # mostrecent
            into[key] = (value, ts)


def fold_rule(prefix: str) -> str:
    mode = prefix[len("gauge_"):] if prefix.startswith("gauge_") else "sum"
    return mode if mode in ("max", "min", "mostrecent") else "sum"


def write_accumulator(path: Path, entries: Entries) -> None:
    """Write ``entries`` as a prometheus_client mmap file and flush it to disk."""
    path.unlink(missing_ok=True)
    d = MmapedDict(str(path))
    try:
        for key, (value, ts) in entries.items():
            d.write_value(key, value, ts)
    finally:
        d.close()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_directory(directory: str | os.PathLike[str]) -> Path:
    p = Path(directory)
    if not p.is_dir():
        what = "no such directory" if not p.exists() else "not a directory"
        raise CompactionError(what, path=str(p))
    return p


def compact(
    directory: str | os.PathLike[str],
    *,
    blocking: bool = True,
    max_writers: int = DEFAULT_MAX_WRITERS,
) -> CompactionResult:
    """Compact the files of up to ``max_writers`` proven-dead writers in ``directory``.

    With ``blocking=False`` it raises ``LockBusy`` instead of waiting for another
    compaction. Live writers' files are never opened for writing, renamed or removed.
    Scrapes wait only for the commit (journal, renames), not for the folding; the commit
    grows with the batch (~0.3 ms per dead writer here), hence the cap: a backlog drains
    over several compactions (``result.pending``) while scrapes go on in between.
    """
    d = check_directory(directory)
    t0 = time.perf_counter()
    with dir_lock(d, exclusive=True, blocking=blocking, compactor=True):
        with dir_lock(d, exclusive=True):
            result = CompactionResult(recovered=roll_forward(d))
            remove_debris(d)
        files = metric_files(d)
        dead = _judge(d, files)
        batch = sorted(dead)[:max_writers]
        result.dead_writers = {pid: dead[pid] for pid in batch}
        result.pending = len(dead) - len(batch)
        dead_files = [f for f in files if f.pid in result.dead_writers]
        renames, remove = _plan(d, files, dead_files, result)
        kept = {f.pid for f in dead_files if str(f.path) in result.unreadable}
        remove += [
            str(writer_record_path(d, pid).relative_to(d))
            for pid in result.dead_writers
            if pid not in kept and writer_record_path(d, pid).exists()
        ]
        committed = bool(remove) and _commit(d, result, renames, remove)
        empty_trash(d)
        result.seconds = time.perf_counter() - t0
        if committed or result.recovered:
            record_compaction(d, result.seconds, len(result.dead_writers))
    return result


def compact_backlog(
    directory: str | os.PathLike[str],
    *,
    blocking: bool = True,
    max_writers: int = DEFAULT_MAX_WRITERS,
) -> CompactionResult:
    """Compact batch after batch until no dead writer is left or a batch makes no progress
    (e.g. it holds only writers with unreadable files, which stay dead and in place)."""
    result = last = compact(directory, blocking=blocking, max_writers=max_writers)
    while last.pending and (last.folded_files or last.dropped_files):
        last = compact(directory, max_writers=max_writers)
        result.add(last)
    return result


def _judge(d: Path, files: list[MetricFile]) -> dict[int, Liveness]:
    judged: dict[int, Liveness] = {}
    for pid in [f.pid for f in files] + recorded_pids(d):
        if pid is not None and pid not in judged:
            judged[pid] = liveness(d, pid)
    return {pid: state for pid, state in judged.items() if state.dead}


def _running(pids: Iterable[int]) -> list[int]:
    """The pids that exist now: only those can have been taken by a new writer."""
    return [pid for pid in pids if os.path.exists(f"/proc/{pid}") or not os.path.isdir("/proc")]


def _commit(
    d: Path, result: CompactionResult, renames: list[tuple[str, str]], remove: list[str]
) -> bool:
    """Swap accumulators in and dead files out, atomically for lock-holding readers.

    A writer registers under the shared lock before opening its files, so re-judging
    under the exclusive lock catches a pid that a new writer took since we judged it;
    then nothing is committed and the next compaction starts over.
    """
    with dir_lock(d, exclusive=True):
        if any(not liveness(d, pid).dead for pid in _running(result.dead_writers)):
            for tmp, _target in renames:
                (d / tmp).unlink(missing_ok=True)
            result.dead_writers, result.folded_files, result.accumulators = {}, 0, 0
            result.dropped_files = 0
            return False
        commit(d, renames, remove)
        roll_forward(d)
    return True


def _plan(
    d: Path, files: list[MetricFile], dead_files: list[MetricFile], result: CompactionResult
) -> tuple[list[tuple[str, str]], list[str]]:
    """Write accumulators aside; return the renames and removals that commit them."""
    renames: list[tuple[str, str]] = []
    remove: list[str] = []
    existing = {f.prefix: f for f in files if f.is_accumulator}
    by_prefix: dict[str, list[MetricFile]] = {}
    for f in dead_files:
        by_prefix.setdefault(f.prefix, []).append(f)
    for prefix, group in sorted(by_prefix.items()):
        if not group[0].folded:
            remove += [f.path.name for f in group]
            result.dropped_files += len(group)
            continue
        entries: Entries = {}
        acc = existing.get(prefix)
        if acc is not None:
            try:
                entries = read_entries(acc.path)
            except _CORRUPT:
                result.unreadable += [str(acc.path)] + [str(f.path) for f in group]
                continue
        folded = _fold_files(fold_rule(prefix), entries, group, result)
        if not folded:
            continue
        tmp = state_dir(d) / (accumulator_path(d, prefix).name + TMP_SUFFIX)
        write_accumulator(tmp, entries)
        renames.append((str(tmp.relative_to(d)), accumulator_path(d, prefix).name))
        remove += [f.path.name for f in folded]
        result.folded_files += len(folded)
        result.accumulators += 1
    return renames, remove


def _fold_files(
    rule: str, into: Entries, group: Iterable[MetricFile], result: CompactionResult
) -> list[MetricFile]:
    folded = []
    for f in group:
        try:
            entries = read_entries(f.path)
        except FileNotFoundError:
            continue
        except _CORRUPT:
            result.unreadable.append(str(f.path))
            continue
        fold(rule, into, entries)
        folded.append(f)
    return folded
