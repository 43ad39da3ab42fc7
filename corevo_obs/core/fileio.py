"""Reading and writing the files the CLI is pointed at, without hanging or half-writing.

A path on a command line may name a FIFO, a device, a directory or a file on a full
disk. ``read_regular`` opens without blocking and refuses anything but a regular file
(a FIFO with no writer would block ``open``/``read`` forever); ``write_files`` writes
each target to a temp file beside it and renames only once every temp is complete, so a
failure (ENOSPC, EACCES, a missing directory) leaves the targets as they were and no
temp file behind.

Both raise ``OSError`` whose ``filename`` is the offending path; callers turn that into
their own ``CorevoObsError``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path

_KINDS = {stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
          stat.S_IFBLK: "a block device", stat.S_IFDIR: "a directory"}


def not_regular(path: str | Path, mode: int) -> OSError:
    """The error for a path that exists but is no regular file (names what it is)."""
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    return OSError(errno.EINVAL, f"not a regular file ({kind})", str(path))


def read_regular(path: str | Path) -> bytes:
    """The bytes of a regular file; a FIFO, socket, device or directory raises at once."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise not_regular(path, mode)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


def _temp_for(target: Path) -> Path:
    """A fresh name beside ``target``, created exclusively with the umask's mode (0644)."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0),
                 0o666)
    os.close(fd)
    return tmp


def _write_temp(tmp: Path, data: bytes) -> None:
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def write_files(items: Sequence[tuple[Path, bytes]]) -> None:
    """Write every ``(target, data)`` all or nothing as far as the filesystem allows.

    All temps are written and synced first; only then is each renamed over its target.
    An existing target that this process may not write (a read-only file) is refused
    rather than silently replaced, and so is a target that is not a regular file.
    """
    for target, _ in items:
        try:
            st = os.stat(target)
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(target, st.st_mode)
        if not os.access(target, os.W_OK):
            raise PermissionError(errno.EACCES, "read-only file", str(target))
    temps: list[tuple[Path, Path]] = []
    try:
        for target, data in items:
            try:
                tmp = _temp_for(target)
            except OSError as exc:
                exc.filename = str(target.parent)  # the directory is what cannot be written
                raise
            temps.append((tmp, target))
            try:
                _write_temp(tmp, data)
            except OSError as exc:
                exc.filename = str(target)
                raise
        while temps:
            tmp, target = temps[0]
            try:
                os.replace(tmp, target)
            except OSError as exc:
                exc.filename = str(target)
                raise
            temps.pop(0)
    finally:
        for tmp, _ in temps:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
