"""Two directory locks: readers vs commit, and one compactor at a time.

- ``.corevo/lock``: scrapes and writer registration hold it shared; a compaction holds
  it exclusive only for its commit (journal, renames, deletes), so scrapes never wait
  behind the slow part (reading dead files, writing and fsyncing accumulators).
- ``.corevo/compact.lock``: held exclusive for a whole compaction.

``flock``, on a file opened afresh on every acquisition: flock locks belong to an open
file description, so two threads of one process (scrape thread, janitor thread) exclude
each other, and the kernel drops the lock when a holder is SIGKILLed.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .layout import COMPACT_LOCK_FILE, LOCK_FILE, state_dir


class LockBusy(Exception):
    """A non-blocking acquisition found the lock taken (another compaction is running)."""


@contextmanager
def dir_lock(
    directory: Path, *, exclusive: bool, blocking: bool = True, compactor: bool = False
) -> Iterator[None]:
    """Hold the readers' lock (or, with ``compactor=True``, the compactors') for the body."""
    path = state_dir(directory) / (COMPACT_LOCK_FILE if compactor else LOCK_FILE)
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o666)
    except FileNotFoundError:  # first use of this directory
        state_dir(directory, create=True)
        fd = os.open(path, flags, 0o666)
    try:
        op = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        if not blocking:
            op |= fcntl.LOCK_NB
        try:
            fcntl.flock(fd, op)
        except BlockingIOError:
            raise LockBusy(str(path)) from None
        yield
    finally:
        os.close(fd)  # closing the only fd of this description releases the lock
