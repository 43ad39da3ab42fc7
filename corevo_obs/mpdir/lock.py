"""Two directory locks: readers vs commit, and one compactor at a time; every wait bounded.

- ``.corevo/lock``: scrapes and writer registration hold it shared; a compaction holds
  it exclusive only for its commit (journal, renames, deletes), so scrapes never wait
  behind the slow part (reading dead files, writing and fsyncing accumulators).
- ``.corevo/compact.lock``: held exclusive for a whole compaction.

``flock``, on a file opened afresh on every acquisition: flock locks belong to an open
file description, so two threads of one process (scrape thread, janitor thread) exclude
each other, and the kernel drops the lock when a holder is SIGKILLed. A holder that is
SIGSTOPped (or a ``flock -x DIR/.corevo/lock sleep 1d`` by anyone who can write the
directory) keeps it, so no acquisition waits in the kernel: it polls with ``LOCK_NB``
until its deadline and then raises ``LockBusy``; the caller decides what to do instead.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

from ..core.errors import CorevoObsError
from .layout import COMPACT_LOCK_FILE, LOCK_FILE, STATE_DIR
from .safe import DirFds, check_regular

#: a scrape waits this long for the readers' lock, then reads without it
SCRAPE_WAIT: Final = 0.5
#: a starting worker waits this long to register, then registers without the lock
REGISTER_WAIT: Final = 2.0
#: a compactor waits this long for the commit lock (readers hold it for milliseconds)
COMMIT_WAIT: Final = 10.0
#: ``corevo-obs metrics compact`` waits this long for another compactor
COMPACT_WAIT: Final = 60.0
_POLL_MAX: Final = 0.002  # short: a waiter must catch the gaps between shared holders


class LockBusy(CorevoObsError):
    """The lock stayed taken until the deadline (another compaction, a stopped holder)."""


def _open_lock(fds: DirFds, name: str) -> int:
    where = fds.where(STATE_DIR, name)
    base = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, base | os.O_RDWR | os.O_CREAT, 0o666, dir_fd=fds.state)
    except OSError as exc:
        if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise type(exc)(exc.errno, exc.strerror, where) from None
        fd = os.open(name, base | os.O_RDONLY, dir_fd=fds.state)  # flock needs no write
    try:
        check_regular(os.fstat(fd), where)
    except BaseException:
        os.close(fd)
        raise
    return fd


def acquire(fd: int, op: int, timeout: float, where: str) -> None:
    """``flock`` with a deadline: ``timeout=0`` tries once."""
    deadline = time.monotonic() + timeout
    pause = 0.0005
    while True:
        try:
            fcntl.flock(fd, op | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise LockBusy(where) from None
            time.sleep(min(pause, left))
            pause = min(pause * 2, _POLL_MAX)


@contextmanager
def dir_lock(
    directory: Path,
    *,
    exclusive: bool,
    timeout: float = COMMIT_WAIT,
    compactor: bool = False,
) -> Iterator[None]:
    """Hold the readers' lock (or, with ``compactor=True``, the compactors') for the body.

    Raises ``LockBusy`` when it is not free within ``timeout`` seconds, ``OSError``
    (``UnsafeEntry`` for a planted symlink or FIFO) when the lock file cannot be opened.
    """
    name = COMPACT_LOCK_FILE if compactor else LOCK_FILE
    with DirFds(directory, create=True) as fds:
        fd = _open_lock(fds, name)
    try:
        acquire(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, timeout,
                str(directory / STATE_DIR / name))
        yield
    finally:
        os.close(fd)  # closing the only fd of this description releases the lock
