"""Every use of prometheus_client's private insides, in one module.

Metric writes go through the public API everywhere (bench/README.md has the figures of
the fast paths that were here). What remains is what has no public API: multiprocess
mode must choose the value class before the first metric exists, its value files get
their disk space reserved so a full disk cannot SIGBUS a writer, and mpdir's compaction
reuses prometheus_client's merge. That touches attributes prometheus_client does not
promise, so it lives here and nowhere else, checked against the releases in
``SUPPORTED`` (pyproject's range; .ci/promclient_versions.sh runs tests/test_promclient.py
and the mpdir tests under both ends).
"""

from __future__ import annotations

import atexit
import errno
import functools
import mmap
import os
import struct
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, cast

from prometheus_client import mmap_dict, values
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector

__all__ = [
    "SPACE_COMPONENT",
    "SUPPORTED",
    "ReservedMmapedDict",
    "flush_held",
    "in_memory_values",
    "merge_multiprocess",
    "reserve_value_files",
    "set_multiprocess_mode",
    "use_multiprocess_values",
]

#: prometheus_client releases whose insides this module was checked against
SUPPORTED: Final = ((0, 20), (0, 26))

# prometheus_client's insides are unannotated: the signatures this module relies on, for
# the casts at each call (looked up at the call, as before, so a missing one still shows)
_PackInteger = Callable[[Any, int, int], None]  # (buffer, offset, value)
_ValueRows = Callable[[], Iterable[tuple[str, float, float, int]]]  # key, value, ts, offset


def use_multiprocess_values() -> None:
    """Switch new metrics to mmap-backed values (what ``PROMETHEUS_MULTIPROC_DIR`` at
    import time would have done), once, before any metric exists; their files get their
    space before a page is touched (``ReservedMmapedDict``)."""
    reserve_value_files()
    if values.ValueClass is values.MutexValue:
        values.ValueClass = cast("Callable[[], type]", values.MultiProcessValue)()


def reserve_value_files() -> None:
    """Value files this process opens from now on get their space before a page is
    touched. Also for a process that never called ``enable_multiprocess`` but has
    ``$PROMETHEUS_MULTIPROC_DIR`` set (prometheus_client then writes files on its own):
    a janitor or a scraper of the directory, whose own counters would otherwise die of
    SIGBUS on a full disk. prometheus_client looks ``MmapedDict`` up when it opens a
    file, so a value class chosen at its import takes this too."""
    if _mmap_layout_ok():
        # values imports MmapedDict without re-exporting it; the lookup is what we replace
        values.MmapedDict = ReservedMmapedDict  # type: ignore[attr-defined]


# --- value files that never SIGBUS on a full disk ---------------------------------------

#: the ``component`` under which a value file without room is counted
SPACE_COMPONENT: Final = "metrics-space"
#: how often a file held in memory tries again to get its room on disk
SPACE_RETRY_SECONDS: Final = 1.0
_ZEROS: Final = bytes(1 << 16)


@functools.cache
def _mmap_layout_ok() -> bool:
    """Whether ``MmapedDict`` still has the layout ``ReservedMmapedDict`` extends."""
    return all(hasattr(mmap_dict, n) for n in ("_pack_integer", "_unpack_integer",
                                                "_INITIAL_MMAP_SIZE")) and all(
        hasattr(mmap_dict.MmapedDict, n) for n in ("_init_value", "write_value", "read_value",
                                                   "_read_all_values", "close"))


def _reserve(fd: int, size: int) -> bool:
    """Give ``fd`` real blocks for bytes ``[0, size)`` (growing it to ``size``); False when
    the file system has no room. Where ``posix_fallocate`` is not supported the bytes are
    rewritten in place, which allocates them the same way."""
    try:
        os.posix_fallocate(fd, 0, size)
        return True
    except OSError as exc:
        if exc.errno == errno.ENOSPC or exc.errno == errno.EDQUOT:
            return False
        if exc.errno not in (errno.EOPNOTSUPP, errno.ENOTSUP, errno.EINVAL):
            raise
    try:
        for off in range(0, size, len(_ZEROS)):
            n = min(len(_ZEROS), size - off)
            have = os.pread(fd, n, off)
            os.pwrite(fd, have + _ZEROS[len(have):n], off)
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return False
        raise
    return True


_HEADER: Final = struct.pack("i", 8) + bytes(4)  # "8 bytes used": a file with no entries
_OPEN_FLAGS: Final = os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW


def _open_existing(filename: str) -> Any:
    """The value file already at ``filename`` (this process's earlier instance, or one
    left by a dead process with the same id), or None. A file too short to hold a header
    holds no value: it is debris of a writer that died creating it (a release that
    created files in place), removed so it is created whole again."""
    try:
        fd = os.open(filename, _OPEN_FLAGS)
    except FileNotFoundError:
        return None
    if os.fstat(fd).st_size < len(_HEADER):
        os.close(fd)
        _unlink_quiet(filename)
        return None
    return open(fd, "r+b")  # noqa: SIM115 - owned until close()


def _create_whole(filename: str, capacity: int) -> Any:
    """A new value file of ``capacity`` reserved bytes with a valid header, put in place
    only once it is whole (or None, nothing left behind, when there is no room): a reader
    never sees it empty or short. prometheus_client's own ``MultiProcessCollector``
    fails every scrape on a 0-byte ``*.db`` (``struct.error``), which is what creating it
    in place and then finding no room for its first bytes left.

    The temporary is hidden and not ``*.db`` (no reader globs it) and carries our pid: a
    namesake's, left by a SIGKILL between its creation and its link, is ours to remove
    (and a compaction removes those whose pid is gone: ``mpdir.layout.value_temp_pid``).
    (``O_TMPFILE`` would leave nothing, but linking it in through ``/proc/self/fd`` is
    refused on some kernels and sandboxes: EXDEV.)
    """
    directory, name = os.path.split(filename)
    tmp = os.path.join(directory or ".", f".{name}.{os.getpid()}.tmp")
    _unlink_quiet(tmp)
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o666)
    try:
        if _reserve(fd, capacity):
            os.pwrite(fd, _HEADER, 0)
            os.link(tmp, filename)  # never over a file that is there: EEXIST
            _unlink_quiet(tmp)
            return open(fd, "r+b")  # noqa: SIM115 - owned until close()
    except FileExistsError:
        pass  # created meanwhile (not by us): keep holding, try later
    except BaseException:
        os.close(fd)
        _unlink_quiet(tmp)
        raise
    os.close(fd)
    _unlink_quiet(tmp)
    return None


def _unlink_quiet(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _count_no_room(where: str) -> None:
    """Count and log a value file without room, from another thread: the caller holds
    prometheus_client's value lock, which the counter's own write takes again."""
    from .guard import absorb

    def run() -> None:
        from .errors import ConfigError
        from .identity import worker_name

        try:
            worker = worker_name()
        except ConfigError:
            worker = f"pid{os.getpid()}"
        absorb(SPACE_COMPONENT, OSError(
            errno.ENOSPC, "no room to grow a metric value file; its values are kept in "
            "memory and written once there is room", where), worker=worker)

    threading.Thread(target=run, name="corevo-metrics-space", daemon=True).start()



_held: weakref.WeakSet[ReservedMmapedDict] = weakref.WeakSet()
_held_guard = threading.Lock()
_retrying: list[threading.Thread] = []


def _keep_trying(d: ReservedMmapedDict) -> None:
    """Have the retry thread (one per process, started on demand) flush ``d``."""
    with _held_guard:
        _held.add(d)
        if not _retrying:
            _arm_exit_flush()
            t = threading.Thread(target=_retry_held, name="corevo-metrics-space-retry",
                                 daemon=True)
            _retrying.append(t)
            t.start()


def flush_held() -> int:
    """Try once to write every held value file out; how many are still held."""
    with _held_guard:
        waiting = list(_held)
    left = 0
    for d in waiting:
        if d._flush():
            with _held_guard:
                _held.discard(d)
        else:
            left += 1
    return left


def _retry_held() -> None:
    while True:
        time.sleep(SPACE_RETRY_SECONDS)
        flush_held()
        with _held_guard:
            if not _held:
                _retrying.clear()
                return


@functools.cache
def _arm_exit_flush() -> None:
    """At a graceful exit, a last try (room may have come back since the last retry)."""
    atexit.register(flush_held)


def _forget_held() -> None:
    """In a forked child: the parent's files are not ours, and its thread is not here."""
    global _held_guard
    _held_guard = threading.Lock()
    _held.clear()
    _retrying.clear()


os.register_at_fork(after_in_child=_forget_held)

class ReservedMmapedDict(mmap_dict.MmapedDict):
    """prometheus_client's per-process value file, given its space before use.

    The stock file grows with ``truncate``, which leaves holes: the first store into a
    hole on a full file system is a SIGBUS that kills the process (rc 135, no log line).
    Here every byte of the mapping is reserved (``posix_fallocate``) before it is mapped,
    so stores never fault, and a new file is put in place only once it is whole (its
    room reserved, its header written): no reader ever sees a 0-byte or short ``*.db``.
    A file that cannot get its room is kept in memory instead
    (counted under ``SPACE_COMPONENT`` and logged once): the process goes on, scrapes
    show the file as it last was on disk (or no file at all), and every
    ``SPACE_RETRY_SECONDS`` a thread tries again, whether or not the process writes; once
    there is room the values, none lost, are written out and mapped again. A process
    killed while its values are held loses them: there was nowhere to keep them.
    """

    def __init__(self, filename: str, read_mode: bool = False) -> None:
        self._held_lock = threading.RLock()
        self._pid = os.getpid()
        if read_mode:
            cast("Callable[[str, bool], None]", super().__init__)(filename, True)
            return
        self._fname = filename
        self._positions: dict[str, int] = {}
        self._f: Any = None
        self._m: Any = None
        held = b""
        try:
            self._f = _open_existing(filename)
            if self._f is not None:
                held = os.pread(self._f.fileno(), os.fstat(self._f.fileno()).st_size, 0)
        except OSError:
            pass
        self._capacity = len(held) or mmap_dict._INITIAL_MMAP_SIZE
        if not self._map(self._capacity):
            self._m = bytearray(held.ljust(self._capacity, b"\0"))
            self._hold()
        self._used = mmap_dict._unpack_integer(self._m, 0)[0]
        if self._used == 0:
            self._used = 8
            cast(_PackInteger, mmap_dict._pack_integer)(self._m, 0, self._used)
        else:
            for key, _, _, pos in cast(_ValueRows, self._read_all_values)():
                self._positions[key] = pos

    def _map(self, capacity: int) -> bool:
        """Reserve ``capacity`` bytes and map them; False when there is no room. A file
        not there yet is created whole (``_create_whole``) or not at all."""
        try:
            if self._f is None:
                self._f = _create_whole(self._fname, capacity)
                if self._f is None:
                    return False
            elif not _reserve(self._f.fileno(), capacity):
                return False
            mapped = mmap.mmap(self._f.fileno(), capacity)
        except OSError:
            return False
        old, self._m = self._m, mapped
        if isinstance(old, mmap.mmap):
            old.close()
        return True

    def _hold(self) -> None:
        """No room on disk: writes go to memory (this instance's ``write_value``) until
        the retry thread finds room (``_flush``)."""
        self.write_value = self._write_held  # type: ignore[method-assign]
        _count_no_room(self._fname)
        _keep_trying(self)

    def _write_held(self, key: str, value: float, timestamp: float) -> None:
        write = cast("Callable[[ReservedMmapedDict, str, float, float], None]",
                     mmap_dict.MmapedDict.write_value)
        with self._held_lock:  # into the mapped file, if _flush swapped it in meanwhile
            write(self, key, value, timestamp)

    def _flush(self) -> bool:
        """Write held values out once there is room and map the file again; True when
        nothing is held any more (also when closed). Never in a forked child: what it
        inherited is its parent's to write (the child's copy would count it twice)."""
        if os.getpid() != self._pid:
            return True
        with self._held_lock:
            if not isinstance(self._m, bytearray):
                return True
            held = bytes(self._m)
            if not self._map(self._capacity):
                return False
            self._m[:] = held  # one copy into the reserved, mapped file
            del self.write_value  # back to the class's method: the file is the truth again
            return True

    def _init_value(self, key: str) -> None:
        """prometheus_client's ``_init_value``, growing by reserving (or in memory)."""
        with self._held_lock:
            self._add_entry(key)

    def _add_entry(self, key: str) -> None:
        encoded = key.encode("utf-8")
        padded = encoded + (b" " * (8 - (len(encoded) + 4) % 8))
        entry = struct.pack(f"i{len(padded)}sdd", len(encoded), padded, 0.0, 0.0)
        end = self._used + len(entry)
        if end > self._capacity:
            capacity = self._capacity
            while end > capacity:
                capacity *= 2
            if isinstance(self._m, mmap.mmap) and not self._map(capacity):
                mapped, self._m = self._m, bytearray(self._m)
                mapped.close()
                self._hold()
            if isinstance(self._m, bytearray):
                self._m.extend(bytes(capacity - len(self._m)))
            self._capacity = capacity
        self._m[self._used:end] = entry
        self._used = end
        cast(_PackInteger, mmap_dict._pack_integer)(self._m, 0, end)
        self._positions[key] = end - 16

    def close(self) -> None:
        self._flush()  # a last try for held values (a fork's reset, the process's exit)
        if isinstance(self._m, mmap.mmap):
            self._m.close()
        self._m = None
        if self._f is not None:
            self._f.close()
            self._f = None


def in_memory_values() -> bool:
    """Whether this process's metrics live in its memory (not in multiprocess files)."""
    return values.ValueClass is values.MutexValue


def merge_multiprocess(metrics: Mapping[str, Metric]) -> list[Metric]:
    """prometheus_client's own merge of per-process samples (what a scrape serves)."""
    accumulate = cast("Callable[[dict[str, Metric], bool], Iterable[Metric]]",
                      MultiProcessCollector._accumulate_metrics)
    return list(accumulate(dict(metrics), True))


def set_multiprocess_mode(metric: Metric, mode: str) -> None:
    """Tell the merge how to combine a gauge's per-process samples."""
    metric._multiprocess_mode = mode  # type: ignore[attr-defined]
