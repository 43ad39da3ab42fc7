"""A real worker process for tests: loop health in multiprocess mode, scripted stalls.

Usage: loop_worker.py WORKER --serve|--no-serve --stall-after S --stall-for S --run-for S
Prints one JSON line when ready ({"port": ...}) and one at exit ({"reports": [...]}).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time

from corevo_obs import MetricsServer, enable_multiprocess, install_loop_health


async def main(ns: argparse.Namespace) -> None:
    health = install_loop_health(worker=ns.worker, interval=0.01)
    server = MetricsServer(port=0).start() if ns.serve else None
    print(json.dumps({"port": server.port if server else None}), flush=True)
    await asyncio.sleep(ns.stall_after)
    if ns.stall_for > 0:
        time.sleep(ns.stall_for)  # noqa: ASYNC251 - the injected freeze: sync call inside async def
    await asyncio.sleep(max(0.0, ns.run_for - ns.stall_after - ns.stall_for))
    await health.aclose()
    if server:
        server.close()
    print(json.dumps({"reports": [r.as_dict() for r in health.reports]}), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("worker")
    p.add_argument("--serve", action="store_true")
    p.add_argument("--stall-after", type=float, default=0.3)
    p.add_argument("--stall-for", type=float, default=0.0)
    p.add_argument("--run-for", type=float, default=1.0)
    p.add_argument("--wait-stdin", action="store_true")
    ns = p.parse_args()
    enable_multiprocess()
    asyncio.run(main(ns))
    if ns.wait_stdin:
        sys.stdin.readline()
