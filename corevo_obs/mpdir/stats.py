"""Per-directory compaction counters, kept on disk so every compactor adds to one total.

Compactions run in many processes (exiting workers, the janitor, cron); a per-process
counter would show only its own share, so the totals live in ``.corevo/stats.json``,
updated under the exclusive lock.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .layout import STATE_DIR, STATS_FILE
from .safe import DirFds, read_regular, replace_file


@dataclass(frozen=True)
class CompactionStats:
    compactions: int = 0
    dead_writers_compacted: int = 0
    last_seconds: float = 0.0
    last_at: float = 0.0


def read_stats(directory: Path) -> CompactionStats:
    """The totals so far; an absent or damaged file reads as zero (a counter reset)."""
    try:
        with DirFds(directory) as fds:
            data = read_regular(fds.state, STATS_FILE, fds.where(STATE_DIR, STATS_FILE),
                                limit=1 << 16)
        raw = json.loads(data.decode("utf-8"))
        return CompactionStats(**{k: raw[k] for k in asdict(CompactionStats())})
    except (OSError, ValueError, KeyError, TypeError):
        return CompactionStats()


def record_compaction(directory: Path, seconds: float, dead_writers: int) -> None:
    """Add one compaction. Hold the exclusive lock."""
    old = read_stats(directory)
    new = CompactionStats(
        compactions=old.compactions + 1,
        dead_writers_compacted=old.dead_writers_compacted + dead_writers,
        last_seconds=seconds,
        last_at=time.time(),
    )
    with DirFds(directory) as fds:
        replace_file(fds.state, STATS_FILE, json.dumps(asdict(new)).encode(),
                     fds.where(STATE_DIR, STATS_FILE))
