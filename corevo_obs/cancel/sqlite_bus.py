"""The cancel bus without Redis: a marker row with an expiry, and a local datagram socket.

The marker is a row in the same SQLite file the leases and jobs use; reads ignore expired
rows and every write purges them, so a marker outlives its TTL only as a dead row until
the next cancel. The wake-up is a Unix datagram socket per owner in Linux's abstract
namespace (no file to clean up after a SIGKILL): like pub/sub it is instant and
fire-and-forget — a datagram to an owner that is not bound right now is refused and
lost, and the marker found at the next heartbeat carries the cancel instead.

One host only, like the SQLite file itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any, Final

from ..core.sqlite import open_sqlite
from .bus import CancelBus, Command, Subscription

MAX_DATAGRAM: Final = 65536

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS corevo_cancel_markers (
    execution TEXT PRIMARY KEY,
    requested REAL,
    acked REAL,
    expires REAL NOT NULL
) WITHOUT ROWID
"""

# Insert or update one field; the row lives as long as the longest TTL given to it.
UPSERT: Final = """
INSERT INTO corevo_cancel_markers (execution, {field}, expires) VALUES (?, ?, ?)
ON CONFLICT (execution) DO UPDATE SET {field} = excluded.{field},
    expires = MAX(expires, excluded.expires)
"""
SELECT: Final = "SELECT {field} FROM corevo_cancel_markers WHERE execution = ? AND expires > ?"
PURGE: Final = "DELETE FROM corevo_cancel_markers WHERE expires <= ?"


def owner_address(namespace: str, owner: str) -> bytes:
    """The abstract socket name of ``owner`` for the database ``namespace`` (108-byte safe)."""
    digest = hashlib.sha1(f"{namespace}\0{owner}".encode()).hexdigest()[:32]
    return b"\0corevo-cancel/" + digest.encode()


class _DatagramSubscription(Subscription):
    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    async def get(self) -> Command:
        raw = await asyncio.get_running_loop().sock_recv(self._sock, MAX_DATAGRAM)
        return Command.decode(raw)

    async def aclose(self) -> None:
        self._sock.close()


class SqliteCancelBus(CancelBus):
    """Markers in ``path`` (a SQLite file shared by the host's processes), wake-ups by socket.

    Example::

        bus = SqliteCancelBus("/var/lib/app/jobs.db")
    """

    def __init__(self, path: str | Path, *, clock: Any = time.time) -> None:
        self.path = os.path.realpath(path)
        self.clock = clock
        self._lock = threading.Lock()
        self._db = open_sqlite(self.path)
        self._db.execute(SCHEMA)
        self._out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._out.setblocking(False)

    def _write(self, field: str, execution_id: str, value: float, ttl: float) -> None:
        now = self.clock()
        with self._lock:
            self._db.execute(PURGE, (now,))
            self._db.execute(UPSERT.format(field=field), (execution_id, value, now + ttl))

    def _read(self, field: str, execution_id: str) -> float | None:
        with self._lock:
            row = self._db.execute(SELECT.format(field=field),
                                   (execution_id, self.clock())).fetchone()
        return None if row is None or row[0] is None else float(row[0])

    async def mark(self, execution_id: str, requested_at: float, ttl: float) -> None:
        await asyncio.to_thread(self._write, "requested", execution_id, requested_at, ttl)

    async def marker(self, execution_id: str) -> float | None:
        return await asyncio.to_thread(self._read, "requested", execution_id)

    async def acknowledge(self, execution_id: str, stopped_at: float, ttl: float) -> None:
        await asyncio.to_thread(self._write, "acked", execution_id, stopped_at, ttl)

    async def acknowledged(self, execution_id: str) -> float | None:
        return await asyncio.to_thread(self._read, "acked", execution_id)

    def rows(self) -> int:
        """Marker rows physically present, expired ones included (for audits and tests)."""
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM corevo_cancel_markers")
                       .fetchone()[0])

    async def send(self, command: Command) -> int:
        try:
            self._out.sendto(command.encode(), owner_address(self.path, command.owner))
        except (ConnectionRefusedError, FileNotFoundError, BlockingIOError):
            return 0  # nobody bound (gone, or between two subscriptions) or its queue is full
        return 1

    async def subscribe(self, owner: str) -> Subscription:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        try:
            sock.bind(owner_address(self.path, owner))
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        return _DatagramSubscription(sock)

    async def aclose(self) -> None:
        self._out.close()
        # closing the last WAL connection checkpoints into the main file: disk I/O
        await asyncio.to_thread(self._close_db)

    def _close_db(self) -> None:
        with self._lock:
            self._db.close()
