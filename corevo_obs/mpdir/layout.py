"""Names in a multiprocess directory: prometheus_client's files and the suite's own state.

prometheus_client writes ``<type>_<pid>.db`` (``counter``, ``histogram``, ``summary``) and
``gauge_<mode>_<pid>.db``. The compactor's accumulators follow the same pattern with the
pid ``compacted`` so an unmodified ``MultiProcessCollector`` sums them like any writer.
Everything else the suite keeps (lock, journal, writer start times, counters) lives in
the hidden ``.corevo/`` subdirectory, which no ``*.db`` glob ever matches.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ACCUMULATOR_ID: Final = "compacted"
STATE_DIR: Final = ".corevo"
WRITERS_DIR: Final = "writers"
LOCK_FILE: Final = "lock"
COMPACT_LOCK_FILE: Final = "compact.lock"
JOURNAL_FILE: Final = "journal.json"
STATS_FILE: Final = "stats.json"
TRASH_DIR: Final = "trash"
TMP_SUFFIX: Final = ".tmp"

PLAIN_TYPES: Final = frozenset({"counter", "histogram", "summary"})
#: gauge modes whose dead writers are folded into an accumulator (the rest are dropped)
FOLDED_GAUGE_MODES: Final = frozenset({"sum", "max", "min", "mostrecent"})
GAUGE_MODES: Final = frozenset(
    FOLDED_GAUGE_MODES | {"all", "liveall", "livesum", "livemax", "livemin", "livemostrecent"}
)


@dataclass(frozen=True)
class MetricFile:
    """One ``*.db`` file, split into what prometheus_client encoded in its name."""

    path: Path
    prefix: str  # "counter", "histogram", "summary" or "gauge_<mode>"
    writer: str  # a pid, or ACCUMULATOR_ID

    @property
    def is_accumulator(self) -> bool:
        return self.writer == ACCUMULATOR_ID

    @property
    def pid(self) -> int | None:
        return int(self.writer) if self.writer.isascii() and self.writer.isdigit() else None

    @property
    def gauge_mode(self) -> str | None:
        return self.prefix[len("gauge_"):] if self.prefix.startswith("gauge_") else None

    @property
    def folded(self) -> bool:
        """Whether a dead writer's values survive compaction (folded) or are dropped."""
        mode = self.gauge_mode
        return mode is None or mode in FOLDED_GAUGE_MODES


def parse_name(path: Path) -> MetricFile | None:
    """The parts of a prometheus_client file name, or None for a name it would not write."""
    name = path.name
    if not name.endswith(".db"):
        return None
    parts = name[:-3].split("_")
    if len(parts) == 2 and parts[0] in PLAIN_TYPES:
        return MetricFile(path, parts[0], parts[1])
    if len(parts) == 3 and parts[0] == "gauge" and parts[1] in GAUGE_MODES:
        return MetricFile(path, f"gauge_{parts[1]}", parts[2])
    return None


def accumulator_path(directory: Path, prefix: str) -> Path:
    return directory / f"{prefix}_{ACCUMULATOR_ID}.db"


def state_dir(directory: Path, *, create: bool = False) -> Path:
    d = directory / STATE_DIR
    if create:
        (d / WRITERS_DIR).mkdir(parents=True, exist_ok=True)
    return d


def writer_record_path(directory: Path, pid: int) -> Path:
    return directory / STATE_DIR / WRITERS_DIR / str(pid)


def metric_files(directory: Path) -> list[MetricFile]:
    """Every regular ``*.db`` file prometheus_client could have written, in a stable order."""
    return list_metric_files(directory)[0]


def list_metric_files(directory: Path) -> tuple[list[MetricFile], list[MetricFile]]:
    """The regular metric files, and the names that look like one but are not a plain file
    (symlink, directory, FIFO, socket: planted or damaged; never read, never moved)."""
    regular: list[MetricFile] = []
    other: list[MetricFile] = []
    with os.scandir(directory) as it:
        for entry in it:
            parsed = parse_name(Path(entry.path))
            if parsed is None:
                continue
            try:
                plain = entry.is_file(follow_symlinks=False)
            except OSError:
                plain = False
            (regular if plain else other).append(parsed)
    regular.sort(key=lambda f: f.path.name)
    other.sort(key=lambda f: f.path.name)
    return regular, other


def live_gauge_files(names: list[str], pid: int) -> list[str]:
    """The live-gauge files of ``pid`` among ``names``: what ``mark_process_dead`` removes."""
    out = []
    for name in names:
        parsed = parse_name(Path(name))
        mode = parsed.gauge_mode if parsed is not None else None
        if parsed is not None and mode is not None and mode.startswith("live") \
                and parsed.writer == str(pid):
            out.append(name)
    return out


def is_journal_rename(tmp: str, target: str) -> bool:
    """Whether a journal rename is one a compaction writes: ``.corevo/X.tmp`` -> ``X``,
    ``X`` an accumulator of a folded type. Anything else (a path, ``..``) is refused."""
    parsed = parse_name(Path(target))
    return (
        parsed is not None and parsed.is_accumulator and parsed.folded and "/" not in target
        and tmp == f"{STATE_DIR}/{target}{TMP_SUFFIX}"
    )


def journal_removal(name: str) -> tuple[str, str] | None:
    """``(where, bare name)`` of a journal removal (``"top"``: a dead writer's metric file,
    ``"writers"``: its record), or None for anything a compaction never removes."""
    record_prefix = f"{STATE_DIR}/{WRITERS_DIR}/"
    if name.startswith(record_prefix):
        pid = name[len(record_prefix):]
        return ("writers", pid) if pid.isdigit() and pid.isascii() else None
    parsed = parse_name(Path(name))
    if parsed is None or "/" in name or parsed.pid is None or not parsed.writer.isascii():
        return None
    return ("top", name)


def value_temp_pid(name: str) -> int | None:
    """The pid in the name of a value file's temporary (``.counter_7.db.7.tmp``: made by
    ``core.promclient`` before the file is linked into place whole), else None."""
    if not (name.startswith(".") and name.endswith(TMP_SUFFIX)):
        return None
    stem, _, pid = name[1:-len(TMP_SUFFIX)].rpartition(".")
    if parse_name(Path(stem)) is None or not (pid.isascii() and pid.isdigit()):
        return None
    return int(pid)
