"""Per-directory compaction counters, kept on disk so every compactor adds to one total.

Compactions run in many processes (exiting workers, the janitor, cron); a per-process
counter would show only its own share, so the totals live in ``.corevo/stats.json``,
updated under the exclusive lock.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from .layout import STATS_FILE, TMP_SUFFIX, state_dir


@dataclass(frozen=True)
class CompactionStats:
    compactions: int = 0
    dead_writers_compacted: int = 0
    last_seconds: float = 0.0
    last_at: float = 0.0


def read_stats(directory: Path) -> CompactionStats:
    """The totals so far; an absent or damaged file reads as zero (a counter reset)."""
    try:
        raw = json.loads((state_dir(directory) / STATS_FILE).read_text(encoding="utf-8"))
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
    path = state_dir(directory) / STATS_FILE
    tmp = path.with_name(path.name + TMP_SUFFIX)
    tmp.write_text(json.dumps(asdict(new)), encoding="utf-8")
    os.replace(tmp, path)
