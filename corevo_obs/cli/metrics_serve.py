"""``corevo-obs metrics serve DIR``: one endpoint per host for every worker's metrics.

For servers whose workers cannot share a port or be hooked from a master
(``uvicorn --workers N``, several independent processes): the workers write to DIR in
multiprocess mode and serve nothing; this process serves their aggregate, each worker
once, and compacts dead writers every ``--compact-every`` seconds. Prometheus scrapes
this one target per host. It is not a writer itself, so it never adds series.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import threading
from typing import Any

from ..exposition import DEFAULT_HOST, MULTIPROC_ENV, MetricsServer, check_metrics_dir

DEFAULT_PORT = 9430
DEFAULT_COMPACT_EVERY = 30.0


def add_parser(msub: Any) -> None:
    p = msub.add_parser("serve", help="serve the aggregate of DIR on one port (one per host)")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--host", default=DEFAULT_HOST, help="address to bind (default %(default)s)")
    p.add_argument("--port", type=_port, default=DEFAULT_PORT,
                   help="port (default %(default)s; 0 picks a free one)")
    p.add_argument("--compact-every", type=_seconds, default=DEFAULT_COMPACT_EVERY,
                   metavar="S", help="seconds between compactions of dead writers; 0 = never")
    p.set_defaults(func=run_serve)


def _port(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {raw!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port must be 0-65535, got {value}")
    return value


def _seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {raw!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {raw!r}")
    return value


def run_serve(args: argparse.Namespace) -> int:
    directory = check_metrics_dir(args.dir)
    os.environ[MULTIPROC_ENV] = str(directory)  # read by exposition_registry(); not a writer
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = MetricsServer(port=args.port, host=args.host,
                           compact_every=args.compact_every or None,
                           port_setting="--port").start()
    try:
        print(f"corevo-obs: serving {directory} at {server.url}", file=sys.stderr, flush=True)
        stop.wait()
    finally:
        server.close()
    return 0
