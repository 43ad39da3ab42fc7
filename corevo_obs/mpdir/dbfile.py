"""prometheus_client's ``.db`` format, read and written with plain ``read``/``write``.

prometheus_client 0.26 (``mmap_dict.py``): an int32 ``used`` byte count, 4 bytes of
padding, then entries ``int32 len, utf-8 key padded with spaces to 8-byte alignment,
float64 value, float64 timestamp``. Its own reader takes ``used == 0`` for "empty",
so a damaged header reads as no data; the parser here is strict instead: a file the
suite wrote (an accumulator) with a bad header is corrupt, and so is a writer's file
whose header is zero while bytes after it are not.

Reading goes through ``safe.open_regular`` (no symlink, FIFO or directory is opened
for reading); writing builds the whole file in memory and writes it with ``write(2)``,
never through mmap, so a full disk is an ``ENOSPC`` error and not a SIGBUS.
"""

from __future__ import annotations

import json
import os
import struct
from functools import lru_cache
from typing import Final

from ..core.errors import CorevoObsError
from ..core.untrusted import printable
from .safe import open_regular, pread_all

Entries = dict[str, tuple[float, float]]  # key -> (value, timestamp)
_INT: Final = struct.Struct("i")  # native order, as prometheus_client packs
_TWO_DOUBLES: Final = struct.Struct("dd")
_HEADER: Final = 8
_FIRST_READ: Final = 4096
_KEPT: Final = "\n\t"  # in help and label values: the exposition escapes them


class CorruptFile(CorevoObsError, ValueError):
    """The bytes are not a prometheus_client metric file."""


def _padded_len(n: int) -> int:
    return n + (8 - (n + 4) % 8)


Key = tuple[str, str, tuple[tuple[str, str], ...], str]  # metric, sample, labels, help


@lru_cache(maxsize=1 << 16)
def parse_key(key: str) -> Key:
    """(metric name, sample name, sorted labels, help) of an entry key, or ``CorruptFile``.

    Control characters are escaped (``core.untrusted``): a planted key must not write
    lines of its own into an exposition or a log. Newlines and tabs in help and label
    values stay: the exposition escapes those itself. Cached: every writer's file
    repeats the same keys, and a scrape parses them all.
    """
    try:
        parsed = json.loads(key)
    except ValueError:
        parsed = None
    if (not isinstance(parsed, list) or len(parsed) != 4
            or not all(isinstance(p, str) for p in (parsed[0], parsed[1], parsed[3]))
            or not isinstance(parsed[2], dict)
            or not all(isinstance(v, str) for v in parsed[2].values())):
        raise CorruptFile(f"unexpected key {key[:80]!r}")
    labels = tuple(sorted((printable(k), printable(v, keep=_KEPT))
                          for k, v in parsed[2].items()))
    return printable(parsed[0]), printable(parsed[1]), labels, printable(parsed[3], keep=_KEPT)


def parse(data: bytes, used: int) -> Entries:
    """Entries of a file whose first ``used`` bytes are ``data``; raises ``CorruptFile``."""
    out: Entries = {}
    pos = _HEADER
    while pos < used:
        if pos + 4 > used:
            raise CorruptFile(f"entry header cut off at byte {pos}")
        (n,) = _INT.unpack_from(data, pos)
        end = pos + 4 + _padded_len(n) + 16
        if n <= 0 or end > used:
            raise CorruptFile(f"entry at byte {pos} has length {n}, beyond the used {used}")
        try:
            key = data[pos + 4:pos + 4 + n].decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptFile(f"entry at byte {pos} is not UTF-8") from None
        parse_key(key)
        out[key] = _TWO_DOUBLES.unpack_from(data, end - 16)
        pos = end
    return out


def read_fd(fd: int, *, accumulator: bool) -> Entries:
    size = os.fstat(fd).st_size
    if size == 0:
        if accumulator:
            raise CorruptFile("empty (the suite never writes an empty accumulator)")
        return {}  # created, not yet sized by its writer: nothing written yet
    head = pread_all(fd, min(size, _FIRST_READ))
    if len(head) < _HEADER:
        raise CorruptFile(f"{len(head)} bytes, shorter than the header")
    (used,) = _INT.unpack_from(head, 0)
    if used == 0 and not accumulator and not any(head) and size <= 1 << 16:
        return {}  # sized, header not yet written: a writer that died at its first metric
    if used < _HEADER or used > size:
        raise CorruptFile(f"header says {used} bytes used of {size}")
    data = head if used <= len(head) else head + pread_all(fd, used - len(head), len(head))
    if len(data) < used:
        raise CorruptFile(f"shorter ({len(data)} bytes) than its header says ({used})")
    return parse(data, used)


def read_db(dir_fd: int, name: str, where: str, *, accumulator: bool) -> Entries:
    """All entries of ``name`` at ``dir_fd``: only a regular file, read without mmap."""
    fd = open_regular(dir_fd, name, where)
    try:
        return read_fd(fd, accumulator=accumulator)
    finally:
        os.close(fd)


def encode(entries: Entries) -> bytes:
    """The bytes of a file prometheus_client's ``MmapedDict`` reads as ``entries``."""
    parts = []
    for key, (value, ts) in entries.items():
        raw = key.encode("utf-8")
        padded = raw.ljust(_padded_len(len(raw)), b" ")
        parts.append(_INT.pack(len(raw)) + padded + _TWO_DOUBLES.pack(value, ts))
    body = b"".join(parts)
    return _INT.pack(_HEADER + len(body)) + b"\0" * 4 + body
