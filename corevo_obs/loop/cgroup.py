"""Container CPU throttling: the cgroup's ``cpu.stat`` throttled time, v1 or v2.

A CPU quota (``cpu.max`` on cgroup v2, ``cpu.cfs_quota_us`` on v1) stops every thread of
the group once the period's quota is spent, until the next period: the loop is late by
up to a period, whatever it was running. ``cpu.stat`` counts that time
(``throttled_usec`` on v2, ``throttled_time`` in ns on v1). The files of this process's
cgroup and its ancestors are found once (from ``/proc/self/cgroup`` and
``/proc/self/mountinfo``, never a hard-coded mount point) and re-read with ``pread``.
A process moved to another cgroup after start keeps reading the old ones.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from typing import Final

_MAX_LEVELS: Final = 4
_FIELDS: Final = ((b"throttled_usec", 1000), (b"throttled_time", 1))


def _mounts(mountinfo: str) -> list[tuple[str, str, str, set[str]]]:
    """(mount point, root inside the hierarchy, fstype, super options) of cgroup mounts."""
    out: list[tuple[str, str, str, set[str]]] = []
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if not sep or len(fields) < 5 or len(tail) < 3 or not tail[0].startswith("cgroup"):
            continue
        out.append((fields[4].replace("\\040", " "), fields[3], tail[0], set(tail[2].split(","))))
    return out


def cpu_stat_files(proc_cgroup: str = "/proc/self/cgroup",
                   mountinfo: str = "/proc/self/mountinfo") -> tuple[str, ...]:
    """The ``cpu.stat`` files that can show this process throttled, nearest first."""
    try:
        with open(proc_cgroup, encoding="utf-8", errors="replace") as f:
            entries = [line.split(":", 2) for line in f.read().splitlines()]
    except OSError:
        return ()
    mounts = _mounts(mountinfo)
    found: list[str] = []
    for entry in entries:
        if len(entry) != 3:
            continue
        _, controllers, path = entry
        v2 = controllers == ""
        for point, root, fstype, options in mounts:
            if v2 != (fstype == "cgroup2") or (not v2 and "cpu" not in controllers.split(",")):
                continue
            if not v2 and "cpu" not in options:
                continue
            rel = path[len(root):] if root != "/" and path.startswith(root) else path
            found.extend(_chain(point, rel))
    return tuple(dict.fromkeys(found))


def _chain(point: str, rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p]
    out: list[str] = []
    for depth in range(len(parts), -1, -1):
        path = os.path.join(point, *parts[:depth], "cpu.stat")
        if len(out) < _MAX_LEVELS and _throttled_fields(path):
            out.append(path)
    return out


def _throttled_fields(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            text = f.read(4096)
    except OSError:
        return False
    return any(name in text for name, _ in _FIELDS)


def throttled(raws: Sequence[bytes | None]) -> tuple[int, int] | None:
    """(throttled ns, times throttled) summed over the files read, or None."""
    total = count = 0
    seen = False
    for raw in raws:
        if not raw:
            continue
        for line in raw.splitlines():
            name, _, value = line.partition(b" ")
            try:
                if name == b"nr_throttled":
                    count += int(value)
                for field, scale in _FIELDS:
                    if name == field:
                        total += int(value) * scale
                        seen = True
            except ValueError:
                continue
    return (total, count) if seen else None


class CgroupProbe:
    """Open ``cpu.stat`` files of this process's cgroups; :meth:`read` never raises."""

    def __init__(self, paths: Sequence[str] | None = None) -> None:
        self.paths = tuple(cpu_stat_files() if paths is None else paths)
        self._fds: list[int] = []
        for p in self.paths:
            with contextlib.suppress(OSError):
                self._fds.append(os.open(p, os.O_RDONLY | os.O_CLOEXEC))

    def read(self) -> tuple[bytes | None, ...]:
        out: list[bytes | None] = []
        for fd in self._fds:
            try:
                out.append(os.pread(fd, 512, 0))
            except OSError:
                out.append(None)
        return tuple(out)

    def close(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
