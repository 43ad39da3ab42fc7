"""An attribute set to None in one method and to an object in another: a method called
on it runs on the object (None has none), so the object's blocking methods count. Twins:
None beside an async driver's connection, two different objects (no single type), and a
file opened read-only whose close flushes nothing."""
import sqlite3
import subprocess

import aiosqlite


class Storage:
    def __init__(self, path: str) -> None:
        self.path = path
        self.conn = None
        self.proc = None

    async def initialize(self) -> None:
        self.conn = sqlite3.connect(self.path, check_same_thread=False)  # error: COB105
        self.proc = subprocess.Popen(["sqlite3", self.path])  # error: COB103

    async def count(self) -> int:
        return self.conn.execute("select count(*) from t").fetchone()[0]  # error: COB105

    async def close(self) -> None:
        self.conn.close()  # error: COB105
        self.conn = None
        self.proc.wait()  # error: COB103


class AsyncStorage:
    def __init__(self, path: str) -> None:
        self.path = path
        self.conn = None

    async def initialize(self) -> None:
        self.conn = await aiosqlite.connect(self.path)

    async def count(self) -> int:
        cursor = await self.conn.execute("select count(*) from t")
        return (await cursor.fetchone())[0]


class Either:
    def __init__(self) -> None:
        self.store = None

    async def open(self, path: str, remote: bool) -> None:
        if remote:
            self.store = await aiosqlite.connect(path)
        else:
            self.store = sqlite3.connect(path)  # error: COB105

    async def count(self) -> None:
        self.store.close()


class ProcessHandle:
    """A status file opened read-only, None once closed: its close flushes nothing."""

    def __init__(self) -> None:
        self.status = None

    async def attach(self, pid: int) -> None:
        self.status = open(f"/proc/{pid}/status")  # error: COB100

    async def detach(self) -> None:
        if self.status is not None:
            self.status.close()
            self.status = None


class Journal:
    """A log file opened for appending, None until opened: its close flushes the writes."""

    def __init__(self) -> None:
        self.logfile = None

    async def start(self, path: str) -> None:
        self.logfile = open(path, "a")  # error: COB100

    async def note(self, line: str) -> None:
        self.logfile.write(line)  # error: COB100

    async def stop(self) -> None:
        self.logfile.close()  # error: COB100
        self.logfile = None
