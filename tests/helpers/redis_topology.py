"""Real Redis topologies for tests and benches: a 3-primary Cluster, a Sentinel set.

Everything runs on loopback ports picked free at start, in a temp dir, without
persistence, and is torn down by ``close()`` (also on a failed start). Nothing is mocked:
``redis-cli --cluster create`` assigns the slots, three Sentinels elect and promote.

Usage::

    with RedisCluster3(tmp) as cluster:       # cluster.ports: the three primaries
        client = redis.cluster.RedisCluster(port=cluster.ports[0])
    with SentinelSet(tmp) as s:               # s.primary, s.replica, s.sentinels
        s.failover()                          # SENTINEL FAILOVER, waits for the new role
"""

from __future__ import annotations

import contextlib
import random
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import redis

SERVICE = "corevo"


class TopologyError(RuntimeError):
    """A topology did not come up (the caller turns it into a skip or a failure)."""


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(n: int, *, bus: bool = False) -> list[int]:
    """``n`` free loopback ports below 45000 (so ``port + 10000``, the Cluster bus port,
    is a valid port too — and free, with ``bus``)."""
    found: list[int] = []
    rng = random.Random()
    while len(found) < n:
        p = rng.randrange(20000, 45000)
        if p in found or (p + 10000) in found:
            continue
        if _free(p) and (not bus or _free(p + 10000)):
            found.append(p)
    return found


def _exe(name: str) -> str:
    exe = shutil.which(name)
    if exe is None:
        raise TopologyError(f"{name} not installed (apt-get install redis-server)")
    return exe


def _wait(what: str, ok: Any, within: float) -> None:
    give_up = time.monotonic() + within
    while True:
        try:
            if ok():
                return
        except (redis.RedisError, OSError):
            pass
        if time.monotonic() > give_up:
            raise TopologyError(f"{what} not ready within {within:.0f}s")
        time.sleep(0.05)


class _Servers:
    """Processes started here, by port; stopped in ``close()``."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    def _spawn(self, port: int, *args: str, exe: str = "redis-server") -> None:
        d = self.tmp / f"n{port}"
        d.mkdir(parents=True, exist_ok=True)
        log = open(d / "log", "wb")  # noqa: SIM115 - closed with the process (inherited)
        self.procs[port] = subprocess.Popen(
            [_exe(exe), *args], cwd=d, stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def _server(self, port: int, *extra: str) -> None:
        self._spawn(port, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no", "--dir", str(self.tmp / f"n{port}"), *extra)
        _wait(f"redis-server :{port}", lambda: redis.Redis(port=port, socket_timeout=1).ping(),
              10)

    def client(self, port: int, **kw: Any) -> redis.Redis:
        return redis.Redis(port=port, socket_timeout=kw.pop("socket_timeout", 2), **kw)

    def kill(self, port: int) -> None:
        """SIGKILL the server on ``port`` (and reap it)."""
        proc = self.procs[port]
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.wait()

    def signal(self, port: int, sig: signal.Signals) -> None:
        self.procs[port].send_signal(sig)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    proc.send_signal(signal.SIGCONT)
                proc.kill()
                proc.wait()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class RedisCluster3(_Servers):
    """Three primaries, no replicas, all 16384 slots assigned by ``redis-cli --cluster``."""

    def __init__(self, tmp: Path, n: int = 3) -> None:
        super().__init__(tmp)
        self.ports = free_ports(n, bus=True)
        try:
            for p in self.ports:
                self._server(p, "--cluster-enabled", "yes", "--cluster-config-file",
                             str(tmp / f"n{p}" / "nodes.conf"),
                             "--cluster-node-timeout", "2000")
            out = subprocess.run(
                [_exe("redis-cli"), "--cluster", "create",
                 *(f"127.0.0.1:{p}" for p in self.ports),
                 "--cluster-replicas", "0", "--cluster-yes"],
                capture_output=True, text=True, timeout=60)
            if out.returncode != 0:
                raise TopologyError(f"redis-cli --cluster create: {out.stdout[-500:]}")
            for p in self.ports:
                _wait(f"cluster node :{p}", lambda p=p: b"cluster_state:ok" in
                      self.client(p).execute_command("CLUSTER", "INFO"), 20)
        except BaseException:
            self.close()
            raise

    def url(self) -> str:
        return f"redis://127.0.0.1:{self.ports[0]}"

    def commandstats(self) -> dict[int, dict[str, int]]:
        """Per primary port: calls per command (``INFO commandstats``)."""
        stats: dict[int, dict[str, int]] = {}
        for p in self.ports:
            raw = self.client(p).info("commandstats")
            stats[p] = {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in raw.items()}
        return stats

    def reset_stats(self) -> None:
        for p in self.ports:
            self.client(p).config_resetstat()


class SentinelSet(_Servers):
    """A primary, one replica and three Sentinels (quorum 2) watching service ``corevo``.

    ``down_after`` is Sentinel's ``down-after-milliseconds``: how long a SIGKILLed primary
    stays primary before the failover starts.
    """

    def __init__(self, tmp: Path, *, down_after_ms: int = 1000) -> None:
        super().__init__(tmp)
        self.primary, self.replica, *self.sentinels = free_ports(5)
        try:
            self._server(self.primary)
            self._server(self.replica, "--replicaof", "127.0.0.1", str(self.primary))
            _wait("replication link", lambda: self.client(self.replica).info(
                "replication").get("master_link_status") == "up", 20)
            for p in self.sentinels:
                d = tmp / f"n{p}"
                d.mkdir(parents=True, exist_ok=True)
                conf = d / "sentinel.conf"
                conf.write_text(
                    f"port {p}\nbind 127.0.0.1\ndir {d}\n"
                    f"sentinel monitor {SERVICE} 127.0.0.1 {self.primary} 2\n"
                    f"sentinel down-after-milliseconds {SERVICE} {down_after_ms}\n"
                    f"sentinel failover-timeout {SERVICE} 10000\n"
                    f"sentinel parallel-syncs {SERVICE} 1\n")
                self._spawn(p, str(conf), "--sentinel")
            for p in self.sentinels:
                _wait(f"sentinel :{p}", lambda p=p: self._sentinel_ready(p), 30)
        except BaseException:
            self.close()
            raise

    def _sentinel_ready(self, port: int) -> bool:
        c = self.client(port)
        replicas = c.execute_command("SENTINEL", "REPLICAS", SERVICE)
        others = c.execute_command("SENTINEL", "SENTINELS", SERVICE)
        return len(replicas) >= 1 and len(others) >= 2

    @property
    def addresses(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", p) for p in self.sentinels]

    def master(self) -> int:
        """The port the Sentinels name as primary now."""
        _, port = self.client(self.sentinels[0]).execute_command(
            "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SERVICE)
        return int(port)

    def _promoted(self, old: int) -> bool:
        new = self.master()
        return new != old and self.client(new).info("replication")["role"] == "master"

    def failover(self, within: float = 20.0) -> int:
        """``SENTINEL FAILOVER`` and wait until the other server is primary; its port."""
        old = self.master()
        self.client(self.sentinels[0]).execute_command("SENTINEL", "FAILOVER", SERVICE)
        _wait("sentinel failover", lambda: self._promoted(old), within)
        return self.master()

    def kill_primary(self, within: float = 20.0) -> int:
        """SIGKILL the primary and wait for the Sentinels to promote the replica."""
        old = self.master()
        self.killed_at = time.monotonic()
        self.kill(old)
        _wait("failover after SIGKILL", lambda: self._promoted(old), within)
        return self.master()

    def restart_as_replica(self, port: int) -> None:
        """Start the (killed) server on ``port`` again, empty, as a replica of the primary."""
        self._server(port, "--replicaof", "127.0.0.1", str(self.master()))

    def wait_replica_link(self, within: float = 45.0) -> None:
        """Until the current primary has a replica in sync again.

        After ``SENTINEL FAILOVER`` the Sentinels turn the old primary into a replica only
        on a later INFO round: 15 s here, 17 s on a loaded CI box, hence the wide bound.
        """
        _wait("replica link", lambda: any(
            isinstance(v, dict) and v.get("state") == "online"
            for k, v in self.client(self.master()).info("replication").items()
            if k.startswith("slave")), within)
