"""Bounded multiprocess metrics: compact dead writers' files, safely, under churn.

See docs/multiprocess-compaction.md. The pieces: ``writers`` (who is proven dead),
``compactor`` + ``journal`` (fold and commit), ``collector`` (locked reads, health),
``janitor`` (periodic), ``hooks`` (writer start/fork/exit), ``status`` (a snapshot).
"""

from .collector import DirHealthCollector, LockedMultiProcessCollector, install_collectors
from .compactor import CompactionResult, compact, compact_backlog
from .errors import CompactionError
from .janitor import Janitor
from .lock import LockBusy
from .status import DirStatus, scan
from .writers import Liveness, liveness

__all__ = [
    "CompactionError",
    "CompactionResult",
    "DirHealthCollector",
    "DirStatus",
    "Janitor",
    "Liveness",
    "LockBusy",
    "LockedMultiProcessCollector",
    "compact",
    "compact_backlog",
    "install_collectors",
    "liveness",
    "scan",
]
