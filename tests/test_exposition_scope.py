"""What a metrics endpoint serves in multiprocess mode: a server inside a worker serves
that worker only (one target per worker, each counted once), the host endpoint serves
every worker once, and a forked child does not inherit a parent's listening socket."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.apps import samples, value

WORKER = """
import json, os, sys, time
from corevo_obs import MetricsServer, enable_multiprocess
from corevo_obs.core.metrics import child
enable_multiprocess()
stalls = child("corevo_event_loop_stalls_total", None, worker=os.environ["COREVO_WORKER"])
stalls.inc(int(sys.argv[1]))
server = MetricsServer(port=0).start()
print(json.dumps({"port": server.port}), flush=True)
if os.fork() == 0:  # a child that outlives its parent must not hold its listening socket
    time.sleep(5)
    os._exit(0)
time.sleep(60)
"""


def _metrics(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        return samples(reply.read().decode())


def test_worker_servers_serve_their_own_worker_and_the_host_serves_all(tmp_path: Path) -> None:
    mp = tmp_path / "mp"
    mp.mkdir()
    root = str(Path(__file__).resolve().parent.parent)
    procs, ports = [], {}
    try:
        for name, count in (("w0", 3), ("w1", 5)):
            env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(mp), "COREVO_WORKER": name,
                   "PYTHONPATH": root}
            p = subprocess.Popen([sys.executable, "-c", WORKER, str(count)], env=env,
                                 stdout=subprocess.PIPE, text=True)
            procs.append(p)
            assert p.stdout is not None
            ports[name] = json.loads(p.stdout.readline())["port"]
        own = {n: _metrics(port) for n, port in ports.items()}
        assert value(own["w0"], "corevo_event_loop_stalls_total") == 3
        assert value(own["w1"], "corevo_event_loop_stalls_total") == 5
        assert value(own["w0"], "corevo_event_loop_stalls_total", worker="w1") == 0
        serve = subprocess.Popen(
            [sys.executable, "-m", "corevo_obs.cli.main", "metrics", "serve", str(mp),
             "--port", "0"], env={**os.environ, "PYTHONPATH": root},
            stderr=subprocess.PIPE, text=True)
        procs.append(serve)
        assert serve.stderr is not None
        line = serve.stderr.readline()
        host_port = int(line.rsplit(":", 1)[1].split("/")[0])
        time.sleep(0.2)
        everyone = _metrics(host_port)
        assert value(everyone, "corevo_event_loop_stalls_total") == 8
        procs[0].kill()  # w0 dies; its forked child lives on
        procs[0].wait()
        with socket.socket() as probe:
            assert probe.connect_ex(("127.0.0.1", ports["w0"])) != 0, \
                "the child kept the dead parent's metrics port open"
    finally:
        for p in procs:
            p.kill()
            p.wait()


def _serve(mp: Path, *args: str) -> tuple[subprocess.Popen[str], int]:
    root = str(Path(__file__).resolve().parent.parent)
    serve = subprocess.Popen(
        [sys.executable, "-m", "corevo_obs.cli.main", "metrics", "serve", str(mp),
         "--port", "0", *args], env={**os.environ, "PYTHONPATH": root},
        stderr=subprocess.PIPE, text=True)
    assert serve.stderr is not None
    line = serve.stderr.readline()
    return serve, int(line.rsplit(":", 1)[1].split("/")[0])


def test_metrics_serve_serves_the_failures_it_absorbed(tmp_path: Path) -> None:
    """``metrics serve`` writes no files: what it absorbs (here a FIFO planted as a metric
    file, left out of every scrape) is counted in its memory and served with the aggregate."""
    mp = tmp_path / "mp"
    mp.mkdir()
    os.mkfifo(mp / "counter_999991.db")
    serve, port = _serve(mp)
    try:
        _metrics(port)
        found = _metrics(port)
    finally:
        serve.kill()
        serve.wait()
    assert value(found, "corevo_instrumentation_errors_total", component="mpdir-collect") >= 1


def test_bad_host_is_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "metrics", "serve",
                           str(tmp_path), "--host", "bogus..host"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "bogus..host" in done.stderr and "not a valid host name" in done.stderr


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def test_idle_connections_do_not_keep_threads(tmp_path: Path) -> None:
    """Connections that never send a request: at most ``MAX_CONNECTIONS`` threads at once,
    and an idle one is closed after ``IDLE_TIMEOUT`` while its client still holds it."""
    from corevo_obs.exposition import IDLE_TIMEOUT, MAX_CONNECTIONS

    mp = tmp_path / "mp"
    mp.mkdir()
    serve, port = _serve(mp)
    idle: list[socket.socket] = []
    try:
        _metrics(port)
        base = _threads(serve.pid)
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(300)]
        time.sleep(1.0)
        peak = _threads(serve.pid)
        assert base + MAX_CONNECTIONS // 2 <= peak <= base + MAX_CONNECTIONS, (base, peak)
        for s in idle:
            s.close()
        idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(50)]
        opened = time.monotonic()
        # the server takes them up (a loaded box may take a moment, and the 300 before
        # may all be gone by then: the count would already read "back to base")
        while _threads(serve.pid) <= base and time.monotonic() < opened + IDLE_TIMEOUT - 1:
            time.sleep(0.02)
        assert _threads(serve.pid) > base, "the idle connections got no thread"
        deadline = opened + IDLE_TIMEOUT + 10
        while _threads(serve.pid) > base and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _threads(serve.pid) <= base, "idle connections kept their threads"
        assert time.monotonic() - opened >= IDLE_TIMEOUT - 0.5  # closed by the timeout
        assert all(s.recv(1) == b"" for s in idle), "the server closed each idle connection"
        assert value(_metrics(port), "corevo_metrics_dir_files") == 0
    finally:
        for s in idle:
            s.close()
        serve.kill()
        serve.wait()
