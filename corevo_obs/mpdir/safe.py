"""File access inside a metrics directory that another user may write: never follow a link.

The directory is untrusted input (see docs/multiprocess-compaction.md, "Threat model"):
whoever can write it can plant symlinks, FIFOs, directories or hard links under any name
the suite uses. So every access below the directory given by the operator goes through a
directory fd and a bare name (``dir_fd=``), opens with ``O_NOFOLLOW | O_NONBLOCK``, and
checks with ``fstat`` that what it opened is a regular file before reading it. Only the
top directory itself is resolved by path: choosing it is the operator's decision.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path
from typing import Final

from ..core.errors import CorevoObsError
from ..core.guard import absorb
from .layout import STATE_DIR

_DIR_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: larger than any file a real writer makes here; a planted sparse giant is refused
MAX_FILE_BYTES: Final = 512 << 20


class UnsafeEntry(CorevoObsError, OSError):
    """A name in the directory is not what the suite writes there (a link, a FIFO, ...).

    An ``OSError`` so that callers that already turn file-system refusals into one line
    (the CLI) or a counted error (scrapes, hooks) handle it the same way.
    """

    @classmethod
    def at(cls, path: str, what: str, code: int = errno.EINVAL) -> UnsafeEntry:
        return cls(code, what, path)


_KINDS: Final = (
    (stat.S_ISREG, "a regular file"), (stat.S_ISLNK, "a symlink"), (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def describe(path: str) -> str:
    """What is at ``path`` (not following a symlink there), for a message."""
    try:
        return _kind(os.lstat(path).st_mode)
    except OSError as exc:
        return exc.strerror or "unreadable"


def check_regular(st: os.stat_result, path: str) -> None:
    """Refuse anything but a plain file with one link (a hard link could be anyone's file)."""
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeEntry.at(path, f"{_kind(st.st_mode)}, not a regular file; not read")
    if st.st_nlink > 1:
        raise UnsafeEntry.at(path, f"has {st.st_nlink} hard links; left alone")
    if st.st_size > MAX_FILE_BYTES:
        raise UnsafeEntry.at(path, f"{st.st_size} bytes, larger than any metric file; left alone")


def unsafe_reason(dir_fd: int, name: str, where: str) -> str | None:
    """Why ``name`` must not be read, moved or removed (``check_regular``), or None when
    it may (a missing name too: the operation's own ``FileNotFoundError`` says so)."""
    st = lstat_at(dir_fd, name)
    if st is None:
        return None
    try:
        check_regular(st, where)
    except UnsafeEntry as exc:
        return exc.strerror
    return None


def describe_at(dir_fd: int, name: str) -> str:
    """What ``name`` is at ``dir_fd`` (not following a symlink), for a message."""
    st = lstat_at(dir_fd, name)
    return "gone" if st is None else _kind(st.st_mode)


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


def open_regular(dir_fd: int, name: str, where: str) -> int:
    """An fd of the regular file ``name`` (never a link, FIFO, device or directory)."""
    st = lstat_at(dir_fd, name)
    if st is None:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", where)
    check_regular(st, where)  # before opening: opening a device can have side effects
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeEntry.at(where, "a symlink; not followed", errno.ELOOP) from None
        raise type(exc)(exc.errno, exc.strerror, where) from None
    try:
        check_regular(os.fstat(fd), where)  # swapped since the lstat
    except BaseException:
        os.close(fd)
        raise
    return fd


def pread_all(fd: int, size: int, offset: int = 0) -> bytes:
    chunks, got = [], 0
    while got < size:
        chunk = os.pread(fd, size - got, offset + got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_regular(dir_fd: int, name: str, where: str, *, limit: int = MAX_FILE_BYTES) -> bytes:
    fd = open_regular(dir_fd, name, where)
    try:
        return pread_all(fd, min(limit, os.fstat(fd).st_size))
    finally:
        os.close(fd)


def write_new(dir_fd: int, name: str, data: bytes, where: str, *, mode: int = 0o666) -> None:
    """Create ``name`` (it must not exist), write ``data`` with ``write(2)`` and fsync.

    No mmap: on a full disk this raises ``ENOSPC`` instead of the SIGBUS that a store into
    an unbacked mmap page gets. A partial file is removed before the error propagates.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, mode, dir_fd=dir_fd)  # mode less the umask, like the writers'
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, where) from None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        unlink_quiet(dir_fd, name)
        raise type(exc)(exc.errno, exc.strerror, where) from None
    os.close(fd)


def replace_file(dir_fd: int, name: str, data: bytes, where: str) -> None:
    """Atomically replace ``name`` with ``data`` (temporary + rename, both at ``dir_fd``)."""
    tmp = f"{name}.{os.getpid()}.tmp"
    unlink_quiet(dir_fd, tmp)
    write_new(dir_fd, tmp, data, where)
    os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def unlink_quiet(dir_fd: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass


def aside_name(name: str, why: str) -> str:
    """``journal.json`` -> ``journal.json.corrupt-20240101T120000-1234`` (kept for a human)."""
    return f"{name}.{why}-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"


def open_dir_at(parent_fd: int | None, name: str | os.PathLike[str], where: str) -> int:
    """Open a directory without following a symlink at its last component."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and parent_fd is not None:
            st = lstat_at(parent_fd, str(name))
            what = _kind(st.st_mode) if st is not None else "gone"
            raise UnsafeEntry.at(where, f"{what} where a directory belongs; refused", exc.errno) \
                from None
        raise type(exc)(exc.errno, exc.strerror, where) from None


def ensure_subdir(parent_fd: int, name: str, where: str) -> int:
    """Open (creating it if missing) a directory the suite owns; anything planted under its
    name (a symlink to another directory, a file) is renamed aside, counted and logged."""
    for _ in range(3):
        try:
            return open_dir_at(parent_fd, name, where)
        except FileNotFoundError:
            pass
        except UnsafeEntry as exc:
            aside = aside_name(name, "refused")
            try:
                os.rename(name, aside, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
            except FileNotFoundError:
                pass
            absorb("mpdir-unsafe", UnsafeEntry.at(where, f"{exc.strerror}; renamed to {aside}"))
        try:
            os.mkdir(name, 0o777, dir_fd=parent_fd)
        except FileExistsError:
            pass
    raise UnsafeEntry.at(where, "keeps being replaced by something else; refused")


def listdir_fd(dir_fd: int) -> list[str]:
    return os.listdir(dir_fd)


class DirFds:
    """The fds of one metrics directory and of the suite's state under it, opened once.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp, DirFds(Path(tmp), create=True) as fds:
    ...     write_new(fds.top, "counter_12.db", b"cells", fds.where("counter_12.db"))
    ...     os.symlink("/etc/passwd", "gauge_13.db", dir_fd=fds.top)  # planted by another user
    ...     data = read_regular(fds.top, "counter_12.db", fds.where("counter_12.db"))
    ...     try:
    ...         read_regular(fds.top, "gauge_13.db", fds.where("gauge_13.db"))
    ...     except UnsafeEntry as exc:
    ...         refused = exc.strerror
    >>> data, refused
    (b'cells', 'a symlink, not a regular file; not read')
    """

    def __init__(self, directory: Path, *, create: bool = False) -> None:
        self.path = directory
        self._create = create
        self._fds: dict[str, int] = {}
        self.top = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._state_name = STATE_DIR

    def where(self, *parts: str) -> str:
        return str(self.path.joinpath(*parts))

    @property
    def state(self) -> int:
        """``.corevo/``: a planted symlink or file here is refused (raises), not moved."""
        fd = self._fds.get("")
        if fd is None:
            where = self.where(self._state_name)
            try:
                fd = open_dir_at(self.top, self._state_name, where)
            except FileNotFoundError:
                if not self._create:
                    raise
                try:
                    os.mkdir(self._state_name, 0o777, dir_fd=self.top)
                except FileExistsError:
                    pass
                fd = open_dir_at(self.top, self._state_name, where)
            self._fds[""] = fd
        return fd

    def sub(self, name: str) -> int:
        """A subdirectory of ``.corevo/`` (``writers``, ``trash``), made safe if needed."""
        fd = self._fds.get(name)
        if fd is None:
            where = self.where(self._state_name, name)
            if self._create:
                fd = ensure_subdir(self.state, name, where)
            else:
                fd = open_dir_at(self.state, name, where)
            self._fds[name] = fd
        return fd

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        if self.top >= 0:
            os.close(self.top)
            self.top = -1

    def __enter__(self) -> DirFds:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def is_regular_at(dir_fd: int, name: str) -> bool:
    st = lstat_at(dir_fd, name)
    return st is not None and stat.S_ISREG(st.st_mode)


def exists_at(dir_fd: int, name: str) -> bool:
    return lstat_at(dir_fd, name) is not None


def state_exists(directory: Path, name: str) -> bool:
    """Whether ``.corevo/<name>`` exists (as anything), without following ``.corevo``."""
    try:
        with DirFds(directory) as fds:
            return exists_at(fds.state, name)
    except OSError:  # no state yet, or a planted link where it should be
        return False
