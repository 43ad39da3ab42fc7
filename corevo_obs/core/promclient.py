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

import errno
import functools
import mmap
import os
import struct
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, cast

from prometheus_client import mmap_dict, values
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector

__all__ = [
    "SPACE_COMPONENT",
    "SUPPORTED",
    "ReservedMmapedDict",
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


class ReservedMmapedDict(mmap_dict.MmapedDict):
    """prometheus_client's per-process value file, given its space before use.

    The stock file grows with ``truncate``, which leaves holes: the first store into a
    hole on a full file system is a SIGBUS that kills the process (rc 135, no log line).
    Here every byte of the mapping is reserved (``posix_fallocate``) before it is mapped,
    so stores never fault. A file that cannot get its room is kept in memory instead
    (counted under ``SPACE_COMPONENT`` and logged once): the process goes on, scrapes
    show the file as it last was on disk, and every ``SPACE_RETRY_SECONDS`` a write tries
    again; once there is room the values, none lost, are written out and mapped again.
    """

    def __init__(self, filename: str, read_mode: bool = False) -> None:
        if read_mode:
            cast("Callable[[str, bool], None]", super().__init__)(filename, True)
            return
        self._fname = filename
        self._positions: dict[str, int] = {}
        self._retry_at = 0.0
        self._f: Any = None
        self._m: Any = None
        held = b""
        try:
            self._f = open(filename, "a+b")  # noqa: SIM115 - owned until close()
            size = os.fstat(self._f.fileno()).st_size
            held = os.pread(self._f.fileno(), size, 0)
        except OSError:
            size = 0
        self._capacity = size or mmap_dict._INITIAL_MMAP_SIZE
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
        """Reserve ``capacity`` bytes and map them; False when there is no room."""
        try:
            if self._f is None:
                self._f = open(self._fname, "a+b")  # noqa: SIM115
            if not _reserve(self._f.fileno(), capacity):
                return False
            mapped = mmap.mmap(self._f.fileno(), capacity)
        except OSError:
            return False
        old, self._m = self._m, mapped
        if isinstance(old, mmap.mmap):
            old.close()
        return True

    def _hold(self) -> None:
        """No room on disk: writes go to memory (this instance's ``write_value``)."""
        self._retry_at = time.monotonic() + SPACE_RETRY_SECONDS
        self.write_value = self._write_held  # type: ignore[method-assign]
        _count_no_room(self._fname)

    def _write_held(self, key: str, value: float, timestamp: float) -> None:
        write = cast("Callable[[ReservedMmapedDict, str, float, float], None]",
                     mmap_dict.MmapedDict.write_value)
        write(self, key, value, timestamp)
        now = time.monotonic()
        if now < self._retry_at:
            return
        self._retry_at = now + SPACE_RETRY_SECONDS
        held = bytes(self._m)
        if self._map(self._capacity):
            self._m[:] = held  # one copy into the reserved, mapped file
            del self.write_value  # back to the class's method: the file is the truth again

    def _init_value(self, key: str) -> None:
        """prometheus_client's ``_init_value``, growing by reserving (or in memory)."""
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
