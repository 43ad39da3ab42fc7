"""``corevo-obs dashboards build [--check]``: regenerate the committed dashboard JSON."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..tooling.grafana import render_all
from ..tooling.grafana.build import write_stale


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
    rendered = render_all(args.dir)  # every source runs before anything is written
    if args.check:
        stale = [r for r in rendered if r.stale]
        for r in stale:
            print(f"stale: {r.output} (run: corevo-obs dashboards build)", file=sys.stderr)
        return 1 if stale else 0
    for path in write_stale(rendered):
        print(f"wrote {path}")
    return 0
