"""Measure request → stop latency per cancel path, on SQLite and on Redis (docs/cancel.md).

Usage (from the repository root): python tests/helpers/cancel_latency.py [ROUNDS]
Starts a private redis-server, runs each path ROUNDS times with the test suite's owner
process (heartbeat and lease timeout from tests/test_cancel.py) and prints median and max.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from prometheus_client import CollectorRegistry  # noqa: E402

from tests import test_cancel as tc  # noqa: E402
from tests.conftest import HELPERS, free_port  # noqa: E402


def rig(backend: str, url: str) -> tc.Rig:
    tmp = Path(tempfile.mkdtemp(prefix="cancel-latency-"))
    (tmp / "metrics").mkdir()
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(tmp / "metrics"),
               PYTHONPATH=os.pathsep.join([str(HELPERS.parent.parent), str(HELPERS)]))
    return tc.Rig(backend, tmp, env, CollectorRegistry(), url if backend == "redis" else None)


async def one(r: tc.Rig, path: str) -> float:
    bus, leases = r.bus(), r.leases()
    gw, job = r.gateway(bus), r.jobs.create_job()
    try:
        async with tc.owner(r, job, reconnect=10.0) as w:
            running = await w.expect("running")
            await asyncio.sleep(random.uniform(0, tc.HEARTBEAT))  # a random heartbeat phase
            if path == "marker":
                await tc._cut_channel(r, w, running["owner"])
            if path == "lease_expiry":
                w.proc.send_signal(signal.SIGKILL)
                await w.proc.wait()
            routed = await gw.cancel(job)
            if path == "lease_expiry":
                seen = await gw.wait_stopped(routed, leases, within=10)
                assert seen.latency is not None
                return seen.latency
            stopped = await w.expect("stopped")
            assert stopped["path"] == path, stopped
            return float(stopped["latency"])
    finally:
        await bus.aclose()
        await leases.aclose()
        shutil.rmtree(r.tmp, ignore_errors=True)


def main(rounds: int) -> None:
    port = free_port()
    server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                               "--save", "", "--appendonly", "no"], stdout=subprocess.DEVNULL)
    time.sleep(0.3)
    url = f"redis://127.0.0.1:{port}/0"
    print(f"heartbeat {tc.HEARTBEAT} s, lease timeout {tc.LEASE_TIMEOUT} s, {rounds} rounds")
    try:
        for backend in ("sqlite", "redis"):
            for path in ("pubsub", "marker", "lease_expiry"):
                lat = [asyncio.run(one(rig(backend, url), path)) for _ in range(rounds)]
                print(f"{backend:7}{path:13}median {statistics.median(lat) * 1000:7.1f} ms"
                      f"   max {max(lat) * 1000:7.1f} ms")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
