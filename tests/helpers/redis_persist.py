"""redis-server as it ships: its persistence from a written redis.conf, killed and restarted
from its own files, frozen, or replaced by its promoted replica behind a TCP proxy.

Modes (``PERSISTENCE``): ``none`` (``save ""``, no AOF: what the other lease tests run),
``rdb`` (Debian's package keeps redis.conf's built-in save rules, ``save 3600 1 300 100 60
10000``, written out explicitly here), ``aof-everysec`` and ``aof-always`` (those rules
plus ``appendonly yes`` with that ``appendfsync``). A restart reads the same directory, so
it comes back from whatever the mode kept: the last snapshot, the append-only file, or
nothing.

``FailoverProxy``: clients connect to the proxy, which forwards to the current primary;
``promote()`` SIGKILLs the primary, makes the replica ``REPLICAOF NO ONE``, points the proxy
at it and cuts every link — what a Sentinel-managed client sees, without Sentinel's
seconds of down-after and election.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis

from tests.helpers.tcp_proxy import LinkProxy

DEBIAN_SAVE = "save 3600 1 300 100 60 10000"
PERSISTENCE: dict[str, list[str]] = {
    "none": ['save ""', "appendonly no"],
    "rdb": [DEBIAN_SAVE, "appendonly no"],
    "aof-everysec": [DEBIAN_SAVE, "appendonly yes", "appendfsync everysec"],
    "aof-always": [DEBIAN_SAVE, "appendonly yes", "appendfsync always"],
}


class ServerGone(RuntimeError):
    """redis-server did not come up (the caller turns it into a skip or a failure)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PersistentRedis:
    """One redis-server with ``mode``'s persistence in its own directory ``d``."""

    def __init__(self, d: Path, mode: str, *, extra: tuple[str, ...] = ()) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise ServerGone("redis-server not installed (apt-get install redis-server)")
        self.exe, self.dir, self.mode, self.port = exe, d, mode, _free_port()
        d.mkdir(parents=True, exist_ok=True)
        self.conf = d / "redis.conf"
        self.conf.write_text("\n".join([
            f"port {self.port}", "bind 127.0.0.1", f"dir {d}", "dbfilename dump.rdb",
            *PERSISTENCE[mode], *extra]) + "\n")
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=2)

    def start(self, *args: str) -> None:
        """Start from the directory's files and wait until it answers (and has loaded)."""
        log = open(self.dir / "log", "ab")  # noqa: SIM115 - inherited by the child
        self.proc = subprocess.Popen([self.exe, str(self.conf), *args], cwd=self.dir,
                                     stdout=log, stderr=subprocess.STDOUT)
        log.close()
        give_up = time.monotonic() + 20
        while time.monotonic() < give_up:
            try:
                with self.client() as c:
                    if c.ping() and not int(c.info("persistence").get("loading", 0)):
                        return
            except (redis.RedisError, OSError):
                pass
            time.sleep(0.02)
        raise ServerGone(f"redis-server :{self.port} ({self.mode}) did not start")

    def kill(self) -> None:
        """SIGKILL (after SIGCONT, in case it is stopped) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(OSError):
                self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()

    def signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def bgsave(self) -> None:
        """A snapshot now (skipped when one is already running)."""
        with contextlib.suppress(redis.RedisError), self.client() as c:
            c.bgsave()

    def save(self) -> None:
        """A snapshot, finished when this returns."""
        with self.client() as c:
            c.save()

    def run_id(self) -> str:
        with self.client() as c:
            return str(c.info("server")["run_id"])

    def close(self) -> None:
        self.kill()


class FailoverProxy(LinkProxy):
    """A TCP proxy to the current primary; ``retarget`` moves it and cuts every link."""

    def __init__(self, upstream: int) -> None:
        super().__init__()
        self.upstream = upstream
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._serve()

    def _link(self, client: socket.socket) -> None:
        try:
            server = socket.create_connection(("127.0.0.1", self.upstream), timeout=0.5)
            server.settimeout(None)
        except OSError:  # the primary is down: a refused connection, as without a proxy
            client.close()
            return
        self._pipe(client, server)

    def retarget(self, upstream: int) -> None:
        with self._lock:
            self.upstream = upstream
        for s in self._cut():
            s.close()


class ReplicatedRedis:
    """A primary and one replica with the same persistence, clients behind a proxy.

    ``restart()``: SIGKILL the primary and start it again from its own files (the replica
    follows it). ``promote()``: SIGKILL the primary, promote the replica, move the proxy,
    then start the old primary from its files as the new replica.
    """

    def __init__(self, tmp: Path, mode: str) -> None:
        self.mode = mode
        # a full resync at once, not after Redis 7's 5 s wait for more replicas
        quick = ("repl-diskless-sync-delay 0",)
        self.primary = PersistentRedis(tmp / "a", mode, extra=quick)
        self.replica = PersistentRedis(tmp / "b", mode, extra=quick)
        self.proxy: FailoverProxy | None = None
        try:
            self.primary.start()
            self._follow(self.replica, self.primary)
            self.proxy = FailoverProxy(self.primary.port)
        except BaseException:
            self.close()
            raise

    @property
    def url(self) -> str:
        assert self.proxy is not None
        return self.proxy.url

    def _follow(self, replica: PersistentRedis, primary: PersistentRedis) -> None:
        replica.start("--replicaof", "127.0.0.1", str(primary.port))
        give_up = time.monotonic() + 20
        while time.monotonic() < give_up:
            with replica.client() as c:
                if c.info("replication").get("master_link_status") == "up":
                    return
            time.sleep(0.05)
        raise ServerGone("the replica did not link")

    def restart(self) -> None:
        self.primary.kill()
        self.primary.start()

    def promote(self) -> None:
        old, new = self.primary, self.replica
        old.kill()
        with new.client() as c:
            c.execute_command("REPLICAOF", "NO", "ONE")
        assert self.proxy is not None
        self.proxy.retarget(new.port)
        self.primary, self.replica = new, old
        self._follow(old, new)

    def close(self) -> None:
        if self.proxy is not None:
            self.proxy.close()
        for s in (self.primary, self.replica):
            s.close()
