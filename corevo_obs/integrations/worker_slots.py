"""Bounded worker names for servers that give no hook to name workers (``uvicorn --workers``).

Each worker takes the lowest free slot ``w0``..``wN-1`` by holding an exclusive ``flock``
on ``SLOTS/wK.lock`` for its whole life. The kernel drops the lock when the process dies
however it dies (SIGKILL included), so the worker started in its place takes the same
slot: the ``worker`` label set stays bounded by the worker count, and the dead worker's
compacted counters carry on under the name its replacement uses.

The slot directory is another process's writable space: lock files are opened with
``O_NOFOLLOW`` (a planted symlink is refused, not followed) and never read or deleted.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Final

from ..core.errors import ConfigError
from ..core.identity import WORKER_ENV

__all__ = [
    "claim_worker_slot",
    "release_worker_slot",
]

DEFAULT_MAX_SLOTS: Final = 64
SLOT_DIR_NAME: Final = ".corevo-slots"
_held: dict[str, int] = {}


def claim_worker_slot(
    directory: str | os.PathLike[str] | None = None,
    *,
    prefix: str = "w",
    max_slots: int = DEFAULT_MAX_SLOTS,
) -> str:
    """Take the lowest free slot, export it as ``$COREVO_WORKER`` and return its name.

    ``directory`` defaults to ``$PROMETHEUS_MULTIPROC_DIR/.corevo-slots``. An explicit
    ``$COREVO_WORKER`` wins (a process manager that names workers knows better). Calling
    it again in the same process returns the slot it holds.
    """
    if os.environ.get(WORKER_ENV) and os.environ.get(WORKER_ENV) not in _held:
        return os.environ[WORKER_ENV]
    for name in _held:
        return name
    slots = _slot_dir(directory)
    for k in range(max_slots):
        name = f"{prefix}{k}"
        fd = _try_lock(slots / f"{name}.lock")
        if fd is not None:
            _held[name] = fd
            os.environ[WORKER_ENV] = name
            return name
    raise ConfigError(f"all {max_slots} worker slots in {slots} are held by live processes",
                      source="claim_worker_slot")


def release_worker_slot() -> None:
    """Give the slot back (a process that exits needs not: the kernel does it)."""
    for name, fd in list(_held.items()):
        with contextlib.suppress(OSError):
            os.close(fd)
        del _held[name]
        if os.environ.get(WORKER_ENV) == name:
            del os.environ[WORKER_ENV]


def _slot_dir(directory: str | os.PathLike[str] | None) -> Path:
    if directory is None:
        base = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if not base:
            raise ConfigError("no slot directory given and $PROMETHEUS_MULTIPROC_DIR is "
                              "not set", source="claim_worker_slot")
        directory = Path(base) / SLOT_DIR_NAME
    path = Path(directory)
    try:
        path.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create slot directory {path} ({exc.strerror})",
                          source="claim_worker_slot") from None
    if path.is_symlink() or not path.is_dir():
        raise ConfigError(f"{path} is not a plain directory", source="claim_worker_slot")
    return path


def _try_lock(path: Path) -> int | None:
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None  # a symlink or something unopenable: not ours, try the next slot
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd
