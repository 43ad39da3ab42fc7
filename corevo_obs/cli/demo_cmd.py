"""``corevo-obs demo``: reproduce the three failure classes on embedded defaults (docs/demo.md)."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser(
        "demo", help="run the multi-worker demo and print a diagnosis",
        description="Reproduce the three incidents on real worker processes (embedded "
                    "SQLite, loopback only) and name each cause. See docs/demo.md.")
    p.add_argument("--workers", type=int, default=3, help="worker processes (2-16, default 3)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--short", action="store_true", help="CI drills: ~15 s, not ~35 s")
    p.add_argument("--redis", metavar="URL", help="keep drill 3's leases in this Redis")
    p.add_argument("--metrics-port", type=int, metavar="PORT",
                   help="serve each worker's /metrics on PORT, PORT+1, ... until Ctrl-C")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..demo.main import run_demo

    return run_demo(workers=args.workers, as_json=args.json, short=args.short,
                    metrics_port=args.metrics_port, redis_url=args.redis)
