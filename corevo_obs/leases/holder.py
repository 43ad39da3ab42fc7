"""Holder ids that name their process, so an auditor can tell a ghost from a live holder.

A holder id is ``worker@host:pid.start#n``: ``start`` is the process start time from
``/proc`` (0 where unavailable), so a recycled pid does not make a dead holder look
alive. ``n`` is a per-process counter, cheap enough for the acquire hot path.
"""

from __future__ import annotations

import itertools
import os
import socket
from dataclasses import dataclass


def process_start(pid: int) -> int:
    """Start time of ``pid`` in clock ticks since boot, 0 if unknown, -1 if gone.

    A zombie (killed, not yet waited for) counts as gone: it holds nothing any more.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return -1
    except OSError:
        return 0
    # comm (field 2) may hold spaces and parens: split after the last ')'.
    fields = raw[raw.rindex(b")") + 2:].split()
    if fields[0] in (b"Z", b"X"):
        return -1
    return int(fields[19])


@dataclass(frozen=True)
class HolderId:
    worker: str
    host: str
    pid: int
    start: int
    seq: str

    @classmethod
    def parse(cls, text: str) -> HolderId | None:
        """The parts of an id minted here; None for ids of another format."""
        try:
            worker, rest = text.rsplit("@", 1)
            where, seq = rest.rsplit("#", 1)
            host, proc = where.rsplit(":", 1)
            pid, start = proc.split(".", 1)
            return cls(worker, host, int(pid), int(start), seq)
        except ValueError:
            return None


_counter = itertools.count(1)  # process-wide: two stores of one worker never mint the same id


def _process_identity() -> str:
    pid = os.getpid()
    return f"{socket.gethostname()}:{pid}.{max(0, process_start(pid))}"


# host:pid.start of this process, read once at import and again in a forked child (an
# at-fork hook, synchronous): minting an id never reads /proc on an event loop
_process = _process_identity()


def _forked() -> None:
    global _process
    _process = _process_identity()


os.register_at_fork(after_in_child=_forked)


class HolderIds:
    """Mints holder ids for this process (its identity follows a fork)."""

    def __init__(self, worker: str) -> None:
        self.worker = worker

    def new(self) -> str:
        return f"{self.worker}@{_process}#{next(_counter)}"


def holder_alive(holder: str, *, host: str | None = None) -> bool | None:
    """Whether the process named by ``holder`` still runs: True, False, or None (unknown).

    Only ids minted on this host can be checked; others are unknown, never "gone".
    """
    h = HolderId.parse(holder)
    if h is None or h.host != (host or socket.gethostname()):
        return None
    start = process_start(h.pid)
    if start == -1:
        return False
    if h.start and start and start != h.start:
        return False  # the pid was recycled by another process
    return True
