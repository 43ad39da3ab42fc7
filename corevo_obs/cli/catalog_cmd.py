"""``corevo-obs catalog``: print the metric catalog (markdown or JSON), the docs' source."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..core.catalog import specs
from ..core.errors import CorevoObsError


def register(sub: Any) -> None:
    p = sub.add_parser("catalog", help="print the metric catalog")
    p.add_argument("--format", choices=("markdown", "json"), default="markdown")
    p.add_argument("--output", metavar="PATH", help="write the docs page (docs/metrics.md)")
    p.set_defaults(func=run)


def render_markdown() -> str:
    rows = ["| metric | type | labels | help |", "|---|---|---|---|"]
    for s in specs():
        labels = ", ".join(
            f"{lb} ({'/'.join(s.values[lb])})" if lb in s.values else lb for lb in s.labels
        )
        rows.append(f"| `{s.name}` | {s.kind} | {labels or '-'} | {s.help} |")
    return "\n".join(rows) + "\n"


def render_page() -> str:
    return (
        "# Metric catalog\n\nGenerated from `corevo_obs/core/catalog.py` by "
        "`corevo-obs catalog --output docs/metrics.md`; a test fails when it is stale.\n\n"
        + render_markdown()
    )


def run(args: argparse.Namespace) -> int:
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(render_page())
        except OSError as exc:
            raise CorevoObsError(f"{args.output}: {exc.strerror or exc}") from None
        return 0
    if args.format == "json":
        data = [
            {
                "name": s.name, "type": s.kind, "help": s.help, "group": s.group,
                "labels": list(s.labels), "buckets": s.buckets,
                "values": {k: list(v) for k, v in s.values.items()},
            }
            for s in specs()
        ]
        print(json.dumps(data, indent=2))
    else:
        print(render_markdown(), end="")
    return 0
