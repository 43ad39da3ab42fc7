"""A snapshot of a multiprocess directory: files, bytes, live and dead writers."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .compactor import check_directory
from .journal import journal_pending
from .layout import metric_files
from .safe import DirFds
from .stats import CompactionStats, read_stats
from .writers import Liveness, liveness, recorded_pids


@dataclass
class DirStatus:
    """What ``corevo-obs metrics status`` prints and the health collector exports."""

    path: Path
    files: int = 0  # regular files at the top level (what a scrape globs over)
    metric_files: int = 0
    accumulators: int = 0
    bytes: int = 0
    live_writers: list[int] = field(default_factory=list)
    dead_writers: dict[int, Liveness] = field(default_factory=dict)
    journal_pending: bool = False
    stats: CompactionStats = field(default_factory=CompactionStats)


def scan(directory: str | os.PathLike[str]) -> DirStatus:
    """Read-only: takes no lock and changes nothing."""
    d = check_directory(directory)
    st = DirStatus(path=d)
    with DirFds(d) as fds:
        try:
            fds.state  # noqa: B018 - a planted link or file as .corevo/ is an error here
        except FileNotFoundError:
            pass
    with os.scandir(d) as it:
        for entry in it:
            try:
                if entry.is_file(follow_symlinks=False):
                    st.bytes += entry.stat(follow_symlinks=False).st_size
                    st.files += 1
            except FileNotFoundError:  # removed since listed (exit hook, compaction)
                continue
    pids: set[int] = set(recorded_pids(d))
    for f in metric_files(d):
        st.metric_files += 1
        st.accumulators += f.is_accumulator
        if f.pid is not None:
            pids.add(f.pid)
    for pid in sorted(pids):
        state = liveness(d, pid)
        if state.dead:
            st.dead_writers[pid] = state
        else:
            st.live_writers.append(pid)
    st.journal_pending = journal_pending(d)
    st.stats = read_stats(d)
    return st
