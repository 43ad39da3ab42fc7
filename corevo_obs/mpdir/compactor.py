"""Fold dead writers' files into one accumulator per file type, in prometheus_client's format.

What survives, per file type (see docs/multiprocess-compaction.md):

- counter, histogram, summary, ``gauge_sum``: values of the same key are added;
- ``gauge_max`` / ``gauge_min``: the max / min is kept;
- ``gauge_mostrecent``: the value with the newest timestamp is kept;
- ``gauge_live*`` and ``gauge_all``: dropped (a dead process has no live value, and
  pid-labelled series of dead pids are stale and unbounded).

Because the collector sums, maxes, mins or picks the newest across files with exactly
these rules, folding files into one before it reads them changes nothing it reports.
The accumulator is written in prometheus_client's own file format (``dbfile``), so any
unmodified ``MultiProcessCollector`` reads it as one more writer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from ..core.guard import absorb
from .dbfile import CorruptFile, Entries, encode, read_db
from .errors import CompactionError
from .journal import commit, empty_trash, remove_debris, roll_forward
from .layout import (
    STATE_DIR,
    TMP_SUFFIX,
    WRITERS_DIR,
    MetricFile,
    accumulator_path,
    list_metric_files,
)
from .lock import COMMIT_WAIT, COMPACT_WAIT, dir_lock
from .safe import DirFds, describe, exists_at, unlink_quiet, unsafe_reason, write_new
from .stats import record_compaction
from .writers import Liveness, liveness, recorded_pids

DEFAULT_MAX_WRITERS: Final = 256
#: what reading a file can raise besides "it vanished": damaged bytes, a planted
#: symlink / FIFO / directory (``UnsafeEntry``), a permission refusal, an I/O error
_CORRUPT = (CorruptFile, OSError)


@dataclass
class CompactionResult:
    """What one compaction did; ``unreadable`` files were left in place, untouched, and
    ``reasons`` says why for each (corrupt, not a regular file, permission denied)."""

    dead_writers: dict[int, Liveness] = field(default_factory=dict)
    folded_files: int = 0
    dropped_files: int = 0
    accumulators: int = 0
    unreadable: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)
    recovered: bool = False
    seconds: float = 0.0
    pending: int = 0  # dead writers left for the next compaction (``max_writers``)

    def add(self, later: CompactionResult) -> None:
        """Account for a later batch of the same backlog."""
        self.dead_writers.update(later.dead_writers)
        self.folded_files += later.folded_files
        self.dropped_files += later.dropped_files
        self.accumulators = max(self.accumulators, later.accumulators)
        for path in later.unreadable:
            self.leave(path, later.reasons.get(path, "unreadable"))
        self.recovered = self.recovered or later.recovered
        self.seconds += later.seconds
        self.pending = later.pending

    def leave(self, path: str, reason: str) -> None:
        """Record a file left in place (once)."""
        if path not in self.reasons:
            self.unreadable.append(path)
        self.reasons[path] = reason


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return f"corrupt: {exc}"


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
    wait: float = COMPACT_WAIT,
    commit_wait: float = COMMIT_WAIT,
) -> CompactionResult:
    """Compact the files of up to ``max_writers`` proven-dead writers in ``directory``.

    It waits up to ``wait`` seconds for another compaction (``blocking=False``: not at
    all) and ``commit_wait`` for readers to let go of the commit lock, then raises
    ``LockBusy``. Live writers' files are never opened for writing,
    renamed or removed; files it cannot read safely are left in place and named in
    ``result.unreadable``, and so is every dead file of a type whose accumulator is
    unreadable (it is never replaced: no counter goes backwards). Scrapes wait only for
    the commit (journal, renames), not for the folding; the commit grows with the batch
    (~0.3 ms per dead writer here), hence the cap: a backlog drains over several
    compactions (``result.pending``) while scrapes go on in between. On a full disk it
    raises ``OSError(ENOSPC)`` having changed nothing (accumulators are written with
    ``write(2)``, never through mmap).
    """
    d = check_directory(directory)
    t0 = time.perf_counter()
    with dir_lock(d, exclusive=True, timeout=wait if blocking else 0.0, compactor=True):
        with dir_lock(d, exclusive=True, timeout=commit_wait):
            result = CompactionResult(recovered=roll_forward(d))
            remove_debris(d)
        files, irregular = list_metric_files(d)
        for f in irregular:
            result.leave(str(f.path), f"{describe(str(f.path))}, not a regular file")
        dead = _judge(d, files + irregular)
        batch = sorted(dead)[:max_writers]
        result.dead_writers = {pid: dead[pid] for pid in batch}
        result.pending = len(dead) - len(batch)
        dead_files = [f for f in files if f.pid in result.dead_writers]
        with DirFds(d, create=True) as fds:
            renames, remove = _plan(fds, files, irregular, dead_files, result)
            try:
                kept = {f.pid for f in dead_files + irregular if str(f.path) in result.reasons}
                records = fds.sub(WRITERS_DIR)
                remove += [
                    f"{STATE_DIR}/{WRITERS_DIR}/{pid}" for pid in result.dead_writers
                    if pid not in kept and exists_at(records, str(pid))
                ]
                committed = bool(remove) and _commit(d, result, renames, remove, commit_wait)
            except BaseException:
                for tmp, _target in renames:
                    unlink_quiet(fds.state, Path(tmp).name)
                raise
        empty_trash(d)
        result.seconds = time.perf_counter() - t0
        if committed or result.recovered:
            try:
                record_compaction(d, result.seconds, len(result.dead_writers))
            except OSError as exc:  # the compaction itself is committed: only a total lags
                absorb("mpdir-stats", exc)
    return result


def compact_backlog(
    directory: str | os.PathLike[str],
    *,
    blocking: bool = True,
    max_writers: int = DEFAULT_MAX_WRITERS,
    wait: float = COMPACT_WAIT,
) -> CompactionResult:
    """Compact batch after batch until no dead writer is left or a batch makes no progress
    (e.g. it holds only writers with unreadable files, which stay dead and in place)."""
    result = last = compact(directory, blocking=blocking, max_writers=max_writers, wait=wait)
    while last.pending and (last.folded_files or last.dropped_files):
        last = compact(directory, max_writers=max_writers, wait=wait)
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
    d: Path, result: CompactionResult, renames: list[tuple[str, str]], remove: list[str],
    wait: float,
) -> bool:
    """Swap accumulators in and dead files out, atomically for lock-holding readers.

    A writer registers under the shared lock before opening its files, so re-judging
    under the exclusive lock catches a pid that a new writer took since we judged it;
    then nothing is committed and the next compaction starts over.
    """
    with dir_lock(d, exclusive=True, timeout=wait):
        if any(not liveness(d, pid).dead for pid in _running(result.dead_writers)):
            with DirFds(d) as fds:
                for tmp, _target in renames:
                    unlink_quiet(fds.state, Path(tmp).name)
            result.dead_writers, result.folded_files, result.accumulators = {}, 0, 0
            result.dropped_files = 0
            return False
        commit(d, renames, remove)
        roll_forward(d)
    return True


def _plan(
    fds: DirFds,
    files: list[MetricFile],
    irregular: list[MetricFile],
    dead_files: list[MetricFile],
    result: CompactionResult,
) -> tuple[list[tuple[str, str]], list[str]]:
    """Write accumulators aside; return the renames and removals that commit them.

    On an error (a full disk) the accumulators written so far are removed again.
    """
    renames: list[tuple[str, str]] = []
    remove: list[str] = []
    existing = {f.prefix: f for f in files if f.is_accumulator}
    planted = {f.prefix: f for f in irregular if f.is_accumulator}
    by_prefix: dict[str, list[MetricFile]] = {}
    for f in dead_files:
        by_prefix.setdefault(f.prefix, []).append(f)
    try:
        for prefix, group in sorted(by_prefix.items()):
            if not group[0].folded:
                for f in group:
                    refused = unsafe_reason(fds.top, f.path.name, str(f.path))
                    if refused is not None:  # a hard link: maybe anyone's file, left alone
                        result.leave(str(f.path), refused)
                        continue
                    remove.append(f.path.name)
                    result.dropped_files += 1
                continue
            entries = _accumulated(fds, prefix, existing, planted, group, result)
            if entries is None:
                continue
            folded = _fold_files(fds, fold_rule(prefix), entries, group, result)
            if not folded:
                continue
            target = accumulator_path(fds.path, prefix).name
            tmp = target + TMP_SUFFIX
            unlink_quiet(fds.state, tmp)
            write_new(fds.state, tmp, encode(entries), fds.where(STATE_DIR, tmp))
            renames.append((f"{STATE_DIR}/{tmp}", target))
            remove += [f.path.name for f in folded]
            result.folded_files += len(folded)
            result.accumulators += 1
    except BaseException:
        for tmp, _target in renames:
            unlink_quiet(fds.state, Path(tmp).name)
        raise
    return renames, remove


def _accumulated(
    fds: DirFds,
    prefix: str,
    existing: dict[str, MetricFile],
    planted: dict[str, MetricFile],
    group: list[MetricFile],
    result: CompactionResult,
) -> Entries | None:
    """What the accumulator of ``prefix`` holds now, or None (and the group left in place)
    when it cannot be read: replacing it would drop what it holds."""
    acc = existing.get(prefix) or planted.get(prefix)
    if acc is None:
        return {}
    if prefix not in existing:
        why = result.reasons.get(str(acc.path), "not a regular file")
    else:
        try:
            return read_db(fds.top, acc.path.name, str(acc.path), accumulator=True)
        except FileNotFoundError:
            return {}
        except _CORRUPT as exc:
            why = _why(exc)
            result.leave(str(acc.path), f"accumulator {why}; not replaced")
    for f in group:
        result.leave(str(f.path), f"not folded: its accumulator {acc.path.name} is {why}")
    return None


def _fold_files(
    fds: DirFds, rule: str, into: Entries, group: Iterable[MetricFile],
    result: CompactionResult,
) -> list[MetricFile]:
    folded = []
    for f in group:
        try:
            entries = read_db(fds.top, f.path.name, str(f.path), accumulator=False)
        except FileNotFoundError:
            continue
        except _CORRUPT as exc:
            result.leave(str(f.path), _why(exc))
            continue
        fold(rule, into, entries)
        folded.append(f)
    return folded
