"""A private PostgreSQL cluster for fault tests: its own data dir, port and processes.

A fault test stops, kills and SIGSTOPs the server, so it must never touch the shared one
that the other tests use. The binaries are found the way .ci/services.sh finds them; the
server refuses root, so as root every command runs as the ``postgres`` user.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import _need, free_port


def find_bindir() -> Path | None:
    """``$PGBIN`` or the newest /usr/lib/postgresql/*/bin holding initdb and pg_ctl."""
    given = os.environ.get("PGBIN")
    candidates = [given] if given else sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))[::-1]
    for bindir in candidates:
        if bindir and all(os.access(Path(bindir) / exe, os.X_OK) for exe in ("initdb", "pg_ctl")):
            return Path(bindir)
    return None


class PgCluster:
    """initdb + pg_ctl on a free port, fsync off; ``stop``/``start``/``freeze``/``thaw``."""

    def __init__(self, bindir: Path, port: int) -> None:
        self.bindir, self.port = bindir, port
        self.datadir = Path(tempfile.mkdtemp(prefix="corevo-pgfault."))
        self._as_pg: list[str] = []
        if os.geteuid() == 0:
            shutil.chown(self.datadir, "postgres", "postgres")
            self._as_pg = ["runuser", "-u", "postgres", "--"]
        self._pg("initdb", "-D", str(self.datadir), "-A", "trust", "-U", "postgres", "-N")

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _pg(self, exe: str, *args: str) -> None:
        subprocess.run([*self._as_pg, str(self.bindir / exe), *args], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60)

    def start(self) -> None:
        opts = (f"-p {self.port} -k {self.datadir} -c listen_addresses=127.0.0.1 "
                "-c fsync=off -c max_connections=60")
        self._pg("pg_ctl", "-D", str(self.datadir), "-l", str(self.datadir / "server.log"),
                 "-w", "-o", opts, "start")

    def running(self) -> bool:
        """``pg_ctl status``: 0 running, 3 not running."""
        return subprocess.run([*self._as_pg, str(self.bindir / "pg_ctl"), "-D",
                               str(self.datadir), "status"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=30).returncode == 0

    def stop(self, mode: str = "immediate") -> None:
        self._pg("pg_ctl", "-D", str(self.datadir), "-m", mode, "-w", "stop")

    def postmaster(self) -> int:
        return int((self.datadir / "postmaster.pid").read_text().split()[0])

    def processes(self) -> list[int]:
        """The postmaster and every backend and auxiliary process it forked."""
        root = self.postmaster()
        found = [root]
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                with open(stat) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == root:
                found.append(int(stat.split("/")[2]))
        return found

    def freeze(self) -> list[int]:
        """SIGSTOP the postmaster first (it forks no more), then all its children."""
        pids = self.processes()
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        return pids

    @staticmethod
    def thaw(pids: list[int]) -> None:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def destroy(self) -> None:
        try:
            self.stop()
        except (subprocess.SubprocessError, OSError):
            pass
        shutil.rmtree(self.datadir, ignore_errors=True)


@contextmanager
def running_cluster() -> Iterator[PgCluster]:
    """A private cluster on a free port, started, and destroyed after; without the
    binaries a skip (a failure where CI requires the servers)."""
    bindir = find_bindir()
    if bindir is None:
        _need("PostgreSQL binaries (initdb, pg_ctl) not found: apt-get install postgresql")
    c = PgCluster(bindir, free_port())
    try:
        c.start()
        yield c
    finally:
        c.destroy()


def wait_until(predicate: Callable[[], bool], within: float, step: float = 0.05) -> float:
    """Seconds until ``predicate()`` is true; AssertionError after ``within`` s."""
    t0 = time.monotonic()
    while not predicate():
        if time.monotonic() - t0 > within:
            raise AssertionError(f"not true within {within} s")
        time.sleep(step)
    return time.monotonic() - t0
