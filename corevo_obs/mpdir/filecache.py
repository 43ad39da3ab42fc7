"""Read a metric file's values without parsing its keys again on every scrape.

A writer only appends entries to its file, so between scrapes its keys stay where they
were and only the values move. ``FileCache`` remembers, per file path, the keys it
parsed (``dbfile``, strict) and one ``struct`` layout of the whole used region; a scrape
then reads the used bytes and unpacks every entry's length, key bytes, value and
timestamp in one C call. The cache is only a memo of the parse: the unpacked lengths and
key bytes must equal the remembered ones (and the header the remembered size), else the
file is parsed again in full. So a file replaced under the same name (a compaction, a
new writer with a reused pid, bytes planted by another user) reads exactly as a fresh
parse would.
"""

from __future__ import annotations

import os
import struct
from typing import cast

from .dbfile import read_fd
from .safe import open_regular, pread_all

_HEADER = 8
_USED = struct.Struct("i")  # native, as prometheus_client packs
Read = tuple["Layout", tuple[float, ...], tuple[float, ...]]


class Layout:
    """What one parse of a file found: its keys in file order, and (made when the file
    is read a second time) how to unpack them all at once."""

    __slots__ = ("keys", "_unpack")

    def __init__(self, keys: tuple[str, ...]) -> None:
        self.keys = keys
        self._unpack: _Unpack | None = None

    @property
    def unpack(self) -> _Unpack:
        if self._unpack is None:
            self._unpack = _Unpack(self.keys)
        return self._unpack


class _Unpack:
    """prometheus_client's ``MmapedDict`` layout of ``keys`` (in this order) as one
    ``struct``: length, key bytes padded with spaces, value, timestamp per entry."""

    __slots__ = ("used", "lengths", "raw", "struct")

    def __init__(self, keys: tuple[str, ...]) -> None:
        encoded = [k.encode("utf-8") for k in keys]
        self.raw = tuple(b.ljust(_padded(len(b)), b" ") for b in encoded)
        self.lengths = tuple(len(b) for b in encoded)
        self.used = _HEADER + sum(4 + len(b) + 16 for b in self.raw)
        fmt = "".join(f"i{len(b)}s2d" for b in self.raw)  # "=": native order, no gaps
        self.struct = struct.Struct(f"={_HEADER}x{fmt}")


def _padded(n: int) -> int:
    return n + (8 - (n + 4) % 8)


class FileCache:
    """Per-file memo of parsed layouts (by path), for one reader of one directory.

    ``read`` returns ``(layout, values, timestamps)``: values and timestamps of
    ``layout.keys``, in file order. Names not read in a scrape are forgotten at ``prune``.
    """

    def __init__(self) -> None:
        self._layouts: dict[str, Layout] = {}
        self._seen: set[str] = set()

    def read(self, dir_fd: int, name: str, where: str, *, accumulator: bool) -> Read:
        """The entries of ``name`` at ``dir_fd``; raises like ``dbfile.read_db``."""
        fd = open_regular(dir_fd, name, where)
        try:
            self._seen.add(where)  # the path: a name may be read at two directory fds
            known = self._layouts.get(where)
            if known is not None and known.keys:
                cells = self._unpack(fd, known.unpack)
                if cells is not None:
                    return (known, cast("tuple[float, ...]", cells[2::4]),
                            cast("tuple[float, ...]", cells[3::4]))
            entries = read_fd(fd, accumulator=accumulator)  # strict, in file order
            layout = self._layouts[where] = Layout(tuple(entries))
            return (layout, tuple(v for v, _ in entries.values()),
                    tuple(t for _, t in entries.values()))
        finally:
            os.close(fd)

    @staticmethod
    def _unpack(fd: int, known: _Unpack) -> tuple[object, ...] | None:
        """Length, key, value, timestamp of every entry at ``known``'s places, or None
        when the file is not laid out so (it grew, or was replaced)."""
        if os.fstat(fd).st_size < known.used:
            return None
        data = pread_all(fd, known.used)
        if len(data) < known.used or _USED.unpack_from(data)[0] != known.used:
            return None
        cells = known.struct.unpack(data)
        if cells[0::4] != known.lengths or cells[1::4] != known.raw:
            return None
        return cells

    def prune(self) -> None:
        """Forget the files no scrape read since the last ``prune`` (gone, compacted)."""
        for where in set(self._layouts) - self._seen:
            del self._layouts[where]
        self._seen.clear()
