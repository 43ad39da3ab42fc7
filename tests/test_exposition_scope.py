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
