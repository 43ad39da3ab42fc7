"""``corevo-obs dashboards build [--check]``: regenerate the committed dashboard JSON."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..dashboards import render_all


def register(sub: Any) -> None:
    p = sub.add_parser("dashboards", help="Grafana dashboards generated from the catalog")
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    b = actions.add_parser("build", help="render dashboards/*.dashboard.py to JSON")
    b.add_argument("--dir", type=Path, default=Path("dashboards"),
                   help="directory of *.dashboard.py sources (default: dashboards)")
    b.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 if any committed JSON is stale")
    b.set_defaults(func=run_build)


def run_build(args: argparse.Namespace) -> int:
    stale = [r for r in render_all(args.dir) if r.stale]
    for r in stale:
        if args.check:
            print(f"stale: {r.output} (run: corevo-obs dashboards build)", file=sys.stderr)
        else:
            r.output.write_text(r.text, encoding="utf-8")
            print(f"wrote {r.output}")
    return 1 if args.check and stale else 0
