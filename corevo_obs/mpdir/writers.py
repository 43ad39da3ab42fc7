"""Who wrote a file, and whether that writer is proven dead.

A pid alone cannot say: pids are reused. Each writer the suite starts records its
identity (boot id, pid namespace, start time in clock ticks from ``/proc/PID/stat``)
under ``.corevo/writers/<pid>`` before it opens any metric file. A writer is dead when
its pid is gone, is a zombie, or now belongs to a process with another start time or
boot. Without a record, a running pid is treated as live: unproven means untouched.
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..core.guard import absorb
from .journal import consistent_view
from .layout import STATE_DIR, WRITERS_DIR, writer_record_path
from .lock import REGISTER_WAIT, LockBusy
from .safe import DirFds, UnsafeEntry, listdir_fd, read_regular, replace_file


class Liveness(enum.Enum):
    LIVE = "live"
    GONE = "gone"  # no such pid
    EXITED = "exited"  # zombie: exited, not yet reaped; it can write no more
    REUSED = "reused"  # the pid belongs to another process now

    @property
    def dead(self) -> bool:
        return self is not Liveness.LIVE


@dataclass(frozen=True)
class ProcState:
    start_ticks: int
    state: str


@dataclass(frozen=True)
class WriterRecord:
    boot_id: str
    pid_ns: str
    start_ticks: int

    def encode(self) -> str:
        return f"{self.boot_id} {self.pid_ns} {self.start_ticks}\n"

    @classmethod
    def decode(cls, text: str) -> WriterRecord | None:
        parts = text.split()
        if len(parts) != 3 or not parts[2].isdigit():
            return None
        return cls(parts[0], parts[1], int(parts[2]))


@cache
def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or "-"
    except OSError:
        return "-"


@cache
def pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return "-"


def proc_state(pid: int) -> ProcState | None:
    """Start time and state of ``pid`` from ``/proc``, or None when there is no such pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    except OSError:
        if os.path.isdir("/proc/self"):
            return None
        return _fallback_state(pid)
    fields = raw[raw.rindex(b")") + 2:].split()  # comm may hold spaces and parentheses
    return ProcState(start_ticks=int(fields[19]), state=fields[0].decode())


def _fallback_state(pid: int) -> ProcState | None:
    """Without /proc we can only ask whether the pid exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return ProcState(start_ticks=-1, state="?")


def own_record() -> WriterRecord:
    state = proc_state(os.getpid())
    return WriterRecord(boot_id(), pid_namespace(), state.start_ticks if state else -1)


def record_writer(directory: Path) -> None:
    """Record this process as a writer; call before it opens any metric file.

    Taken under the shared lock, so a compaction that judged an earlier owner of this pid
    dead has finished removing that owner's files before we may open files of that name.
    The wait is bounded (``REGISTER_WAIT``): behind a stopped holder the worker registers
    without the lock (logged, counted) rather than never starting. Raises ``OSError``
    when the record cannot be written (full disk, read-only, a planted link).
    """
    with consistent_view(directory, timeout=REGISTER_WAIT) as locked:
        if not locked:
            absorb("mpdir-register", LockBusy(
                f"{directory}: readers' lock busy for {REGISTER_WAIT:.0f} s; registered "
                "without it"))
        with DirFds(directory, create=True) as fds:
            name = str(os.getpid())
            replace_file(fds.sub(WRITERS_DIR), name, own_record().encode().encode(),
                         fds.where(STATE_DIR, WRITERS_DIR, name))


def read_record(directory: Path, pid: int) -> WriterRecord | None:
    """This pid's record; None when there is none or it is not a plain, readable file."""
    try:
        with DirFds(directory) as fds:
            raw = read_regular(fds.sub(WRITERS_DIR), str(pid), str(writer_record_path(
                directory, pid)), limit=4096)
        return WriterRecord.decode(raw.decode())
    except (OSError, UnicodeDecodeError):
        return None


def liveness(directory: Path, pid: int) -> Liveness:
    """Whether the writer of ``pid``'s files is alive, or how we know it is dead."""
    rec = read_record(directory, pid)
    if rec is not None and rec.boot_id != boot_id():
        return Liveness.GONE  # written before a reboot
    if rec is not None and rec.pid_ns != pid_namespace():
        return Liveness.LIVE  # another pid namespace: our view of that pid proves nothing
    state = proc_state(pid)
    if state is None:
        return Liveness.GONE
    if state.state in ("Z", "X"):
        return Liveness.EXITED
    if rec is None or state.start_ticks < 0:
        return Liveness.LIVE  # cannot prove otherwise
    if rec.start_ticks != state.start_ticks:
        return Liveness.REUSED
    return Liveness.LIVE


def recorded_pids(directory: Path) -> list[int]:
    try:
        with DirFds(directory) as fds:
            names = listdir_fd(fds.sub(WRITERS_DIR))
    except (FileNotFoundError, NotADirectoryError, UnsafeEntry):
        return []
    return sorted(int(n) for n in names if n.isascii() and n.isdigit())
