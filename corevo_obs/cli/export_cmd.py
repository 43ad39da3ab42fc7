"""``corevo-obs export``: copy the shipped dashboards and alert files out of the package."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..tooling.assets import KINDS, export


def register(sub: Any) -> None:
    p = sub.add_parser(
        "export",
        help="write the shipped Grafana dashboards and Prometheus/Alertmanager files",
        description="Copy the generated Grafana dashboards (JSON to import or provision) and "
        "the alert rules, their promtool tests and the Alertmanager example into DIR/<kind>/. "
        "An existing file with other content stops the export before anything is written.",
    )
    p.add_argument("what", choices=(*KINDS, "all"), help="which files")
    p.add_argument("dest", metavar="DIR", type=Path, help="destination directory")
    p.add_argument("--force", action="store_true", help="replace files that differ")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    kinds = KINDS if args.what == "all" else (args.what,)
    written = export(kinds, args.dest, force=args.force)
    for path in written:
        print(path)
    return 0
