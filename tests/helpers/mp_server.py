"""The process that serves ``/metrics`` in multiprocess mode: a real ``MetricsServer``.

    mp_server.py [--compact-every 0.2] [--warm mpdir-janitor,mpdir-collect]

Calls ``enable_multiprocess`` (the env directory), starts ``MetricsServer(port=0,
compact_every=...)``, prints ``{"port": ..., "pid": ...}`` and serves until a line
arrives on stdin. ``--warm`` creates the ``corevo_instrumentation_errors_total`` series
of the named components up front (once needed on a full disk, where a new series in a
hole of prometheus_client's mmap file was a SIGBUS; the value files are now reserved).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from corevo_obs import MetricsServer, enable_multiprocess
from corevo_obs.core.metrics import child


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--compact-every", type=float, default=0.0)
    ap.add_argument("--warm", default="")
    args = ap.parse_args()
    enable_multiprocess()
    for component in filter(None, args.warm.split(",")):
        child("corevo_instrumentation_errors_total", None, worker="unknown",
              component=component).inc(0)
    server = MetricsServer(port=0, compact_every=args.compact_every or None,
                           scope="host").start()  # a writer serving every worker, on purpose
    print(json.dumps({"port": server.port, "pid": os.getpid()}), flush=True)
    sys.stdin.readline()
    server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
