"""Bounded multiprocess metrics: compact dead writers' files, safely, under churn.

See docs/multiprocess-compaction.md. The pieces: ``writers`` (who is proven dead),
``compactor`` + ``journal`` (fold and commit), ``collector`` (locked reads, health),
``janitor`` (periodic), ``hooks`` (writer start/fork/exit), ``status`` (a snapshot).
"""

from .collector import DirHealthCollector, LockedMultiProcessCollector, install_collectors
from .compactor import CompactionResult, compact, compact_backlog
from .dbfile import CorruptFile
from .errors import CompactionError
from .janitor import Janitor
from .journal import JournalRefused
from .lock import LockBusy
from .safe import UnsafeEntry
from .status import DirStatus, scan
from .writers import Liveness, liveness

__all__ = [
    "CompactionError",
    "CompactionResult",
    "CorruptFile",
    "DirHealthCollector",
    "DirStatus",
    "Janitor",
    "JournalRefused",
    "Liveness",
    "LockBusy",
    "LockedMultiProcessCollector",
    "UnsafeEntry",
    "compact",
    "compact_backlog",
    "install_collectors",
    "liveness",
    "scan",
]
