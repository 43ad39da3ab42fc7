"""Writer-side hooks installed by ``enable_multiprocess``: identity record, fork, exit.

- at start and in every forked child: record the writer's start time (``writers``);
- at graceful exit: if at least ``threshold`` writers are proven dead, compact, without
  waiting behind a compaction already running. The exiting process is still alive here,
  so its own files wait for the next compaction; that is what keeps the hook safe.
"""

from __future__ import annotations

import atexit
import os
from pathlib import Path
from typing import Final

from ..core.errors import ConfigError
from ..core.guard import absorb
from .compactor import compact
from .lock import LockBusy
from .status import scan
from .writers import record_writer

THRESHOLD_ENV: Final = "COREVO_COMPACT_AT_EXIT"
DEFAULT_THRESHOLD: Final = 16
#: an exiting worker gives up on compacting after this long behind a lock holder
EXIT_COMMIT_WAIT: Final = 1.0

_state: dict[str, object] = {}


def exit_threshold() -> int:
    """Dead writers that make an exiting worker compact; ``$COREVO_COMPACT_AT_EXIT``, 0 = off."""
    raw = os.environ.get(THRESHOLD_ENV)
    if raw is None or raw == "":
        return DEFAULT_THRESHOLD
    if not raw.isdigit():
        raise ConfigError(f"must be a whole number >= 0, got {raw!r}", source=f"${THRESHOLD_ENV}")
    return int(raw)


def compact_at_exit(directory: Path, threshold: int) -> None:
    if threshold <= 0:
        return
    try:
        if len(scan(directory).dead_writers) >= threshold:
            compact(directory, blocking=False, commit_wait=EXIT_COMMIT_WAIT)
    except LockBusy:
        pass
    except Exception as exc:  # noqa: BLE001 - never fail a worker's exit
        absorb("mpdir-exit", exc)


def _exit_hook() -> None:
    directory, threshold = _state.get("dir"), _state.get("threshold")
    if isinstance(directory, Path) and isinstance(threshold, int):
        compact_at_exit(directory, threshold)


def _after_fork() -> None:
    directory = _state.get("dir")
    if isinstance(directory, Path):
        try:
            record_writer(directory)
        except Exception as exc:  # noqa: BLE001 - the child still runs, unproven = live
            absorb("mpdir-fork", exc)


def install_writer(directory: Path, threshold: int | None = None) -> None:
    """Record this writer and arm the fork and exit hooks (once per process tree)."""
    limit = exit_threshold() if threshold is None else threshold
    record_writer(directory)
    first = "dir" not in _state
    _state["dir"], _state["threshold"] = directory, limit
    if first:
        os.register_at_fork(after_in_child=_after_fork)
        atexit.register(_exit_hook)
