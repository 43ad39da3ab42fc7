"""What the Linux scheduler says about a thread: CPU time, run delay, state, syscall.

``/proc/self/task/<tid>/schedstat`` holds three numbers: nanoseconds on the CPU,
nanoseconds spent runnable but waiting for a CPU (the run delay), and timeslices. The
loop thread's file is opened once and re-read with ``pread`` (about 0.4 µs), so a
reading can be taken at every sampler beat. The other files are read only while a stall
is being reported. Elsewhere than Linux every reading is None and the causes that need
it are not claimed.
"""

from __future__ import annotations

import contextlib
import os
import platform
import threading
from typing import Final

_TASKS: Final = "/proc/self/task"
# the syscalls a stalled loop thread is most often found in, by number, per machine
_SYSCALLS: Final[dict[str, dict[int, str]]] = {
    "x86_64": {0: "read", 1: "write", 7: "poll", 17: "pread64", 23: "select",
               35: "nanosleep", 42: "connect", 43: "accept", 44: "sendto", 45: "recvfrom",
               61: "wait4", 74: "fsync", 75: "fdatasync", 202: "futex",
               230: "clock_nanosleep", 232: "epoll_wait", 270: "pselect6", 271: "ppoll",
               281: "epoll_pwait", 288: "accept4", 441: "epoll_pwait2"},
    "aarch64": {22: "epoll_pwait", 63: "read", 64: "write", 67: "pread64", 72: "pselect6",
                73: "ppoll", 82: "fsync", 83: "fdatasync", 98: "futex", 101: "nanosleep",
                115: "clock_nanosleep", 202: "accept", 203: "connect", 206: "sendto",
                207: "recvfrom", 242: "accept4", 260: "wait4", 441: "epoll_pwait2"},
}
_NAMES: Final = _SYSCALLS.get(platform.machine(), {})


def parse(raw: bytes | None) -> tuple[int, int] | None:
    """(on-CPU ns, run-delay ns) from a schedstat line, or None."""
    if not raw:
        return None
    parts = raw.split()
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return None


class ThreadProbe:
    """An open schedstat file of one thread; :meth:`read` never raises."""

    def __init__(self, native_id: int) -> None:
        self.native_id = native_id
        self._fd: int | None = None
        with contextlib.suppress(OSError):
            self._fd = os.open(f"{_TASKS}/{native_id}/schedstat", os.O_RDONLY | os.O_CLOEXEC)

    @property
    def available(self) -> bool:
        return self._fd is not None

    def read(self) -> bytes | None:
        fd = self._fd
        if fd is None:
            return None
        try:
            return os.pread(fd, 96, 0)
        except OSError:
            return None

    def close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _read(path: str, size: int = 512) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)


def threads_sched() -> dict[int, tuple[int, int]]:
    """(on-CPU ns, run-delay ns) of every thread of this process, by native id.

    Both count for a thread that holds the GIL: it keeps it while it waits for a CPU
    (threads waiting for the GIL sleep in a futex, so they add to neither)."""
    out: dict[int, tuple[int, int]] = {}
    try:
        tids = os.listdir(_TASKS)
    except OSError:
        return out
    for name in tids:
        if name.isdigit():
            got = parse(_read(f"{_TASKS}/{name}/schedstat", 96))
            if got is not None:
                out[int(name)] = got
    return out


def state(native_id: int) -> str | None:
    """The scheduler state letter (R runnable, S sleeping, D uninterruptible, T stopped)."""
    raw = _read(f"{_TASKS}/{native_id}/stat")
    if not raw or b")" not in raw:
        return None
    rest = raw.rsplit(b")", 1)[1].split()
    return rest[0].decode("ascii", "replace") if rest else None


def syscall(native_id: int) -> str | None:
    """The system call the thread is blocked in, by name ("running" when on the CPU)."""
    raw = _read(f"{_TASKS}/{native_id}/syscall", 256)
    if not raw:
        return None
    first = raw.split()[0].decode("ascii", "replace")
    if first == "running" or not first.lstrip("-").isdigit():
        return first
    number = int(first)
    if number < 0:
        return None  # blocked, but not in a syscall
    return _NAMES.get(number, f"syscall {number}")


def native_ids() -> dict[int, tuple[int, str]]:
    """Python thread ident -> (native id, name) for the threads ``threading`` knows."""
    out: dict[int, tuple[int, str]] = {}
    for t in threading.enumerate():
        if t.ident is not None and t.native_id is not None:
            out[t.ident] = (t.native_id, t.name)
    return out
