"""Writer-side hooks installed by ``enable_multiprocess``: identity record, fork, exit.

- at start and in every forked child: record the writer's start time (``writers``);
- at graceful exit: if at least ``threshold`` writers are proven dead, compact, without
  waiting behind a compaction already running. The exiting process is still alive here,
  so its own files wait for the next compaction; that is what keeps the hook safe.
"""

from __future__ import annotations

import atexit
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from ..core.guard import absorb
from ..core.settings import option, resolve
from .compactor import compact
from .lock import LockBusy
from .status import scan
from .writers import record_writer

ENV_PREFIX: Final = "COREVO"
DEFAULT_THRESHOLD: Final = 16
#: an exiting worker gives up on compacting after this long behind a lock holder
EXIT_COMMIT_WAIT: Final = 1.0

_state: dict[str, object] = {}


@dataclass(frozen=True)
class ExitSettings:
    """``$COREVO_COMPACT_AT_EXIT``: dead writers that make an exiting worker compact (0 = off)."""

    compact_at_exit: int = option(DEFAULT_THRESHOLD, minimum=0)


def exit_threshold() -> int:
    """``$COREVO_COMPACT_AT_EXIT`` or the default; a bad value is a ``ConfigError`` naming it.

    Read by ``enable_multiprocess`` (a call the user makes at start-up); glue that runs
    inside a server instead resolves ``ExitSettings`` with ``resolve_in_host``.
    """
    return resolve(ExitSettings, ENV_PREFIX).compact_at_exit


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
