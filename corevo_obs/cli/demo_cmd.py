"""``corevo-obs demo``: reproduce the article's incidents on embedded defaults."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="run the multi-worker demo and print a diagnosis")
    p.add_argument("--workers", type=int, default=3, help="worker processes (2-16, default 3)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--short", action="store_true", help="shorter drills (CI)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..demo.main import run_demo

    return run_demo(workers=args.workers, as_json=args.json, short=args.short)
