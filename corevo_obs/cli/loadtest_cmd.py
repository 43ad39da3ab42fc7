"""``corevo-obs loadtest APP --workload FILE``: the validation workload as a CI gate.

Exit 0 when every budget held, 1 when one broke (the failing verdicts name the worker,
the line and how far the heartbeat moved), 2 on bad input (one line naming the key,
flag or host).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any


def register(sub: Any) -> None:
    from ..loadtest.workload import budget_names

    p = sub.add_parser(
        "loadtest", help="drive an app with the validation workload and judge its loop",
        description="Serve APP (pkg.module:app, ASGI or aiohttp) in worker processes, or "
                    "drive a URL of an app already running on loopback; run the seeded mix "
                    "of a workload file beside an idle-baselined heartbeat; judge loop lag, "
                    "stalls, probe interference, offload, upstream errors, late side effects "
                    "and a mid-run worker kill against budgets. See docs/loadtest.md.")
    p.add_argument("app", metavar="APP", help="import path pkg.module:app, or a loopback URL")
    p.add_argument("--workload", required=True, metavar="FILE", help="the workload (TOML)")
    p.add_argument("--workers", type=_workers, default=2,
                   help="worker processes when serving an import path (1-16, default 2)")
    p.add_argument("--seed", type=_seed, help="override the workload's seed")
    p.add_argument("--out", metavar="DIR", help="where report.html/.json and server.log go "
                   "(default: a new temp directory)")
    p.add_argument("--metrics-url", metavar="URL",
                   help="with a URL APP: its metrics endpoint (default APP/metrics)")
    p.add_argument("--server-log", metavar="FILE",
                   help="with a URL APP: the app's log, for the stall lines")
    p.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    for name in budget_names():
        p.add_argument(f"--budget-{name.replace('_', '-')}", dest=f"budget_{name}",
                       metavar="X", help=f"override budgets.{name}")
    p.set_defaults(func=run)


def _workers(raw: str) -> int:
    try:
        n = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {raw!r}") from None
    if not 1 <= n <= 16:
        raise argparse.ArgumentTypeError(f"must be 1-16, got {n}")
    return n


def _seed(raw: str) -> int:
    try:
        n = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {raw!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {n}")
    return n


def run(args: argparse.Namespace) -> int:
    from ..loadtest.workload import budget_names, load_workload

    workload = load_workload(args.workload)
    overrides = {n: getattr(args, f"budget_{n}") for n in budget_names()
                 if getattr(args, f"budget_{n}") is not None}
    workload = workload.with_overrides(seed=args.seed, budgets=overrides)
    from ..core.errors import ConfigError

    if "://" not in args.app and args.server_log:
        raise ConfigError("only with a URL (the tool reads its own server's log)",
                          source="--server-log")
    try:
        import aiohttp  # noqa: F401 - the driver and the upstream need it
    except ImportError:
        raise ConfigError("needs aiohttp: pip install 'corevo-obs[aiohttp]'",
                          source="corevo-obs loadtest") from None
    from ..loadtest.loopback import check_loopback
    from ..loadtest.run import run_loadtest

    if "://" in args.app:
        check_loopback(args.app, "APP")  # refused before anything starts
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="corevo-loadtest-"))
    result = run_loadtest(args.app, workload, workers=args.workers, out_dir=out,
                          metrics_url=args.metrics_url,
                          server_log=Path(args.server_log) if args.server_log else None)
    if args.json:
        import json

        print(json.dumps({"failed": result.failed,
                          "verdicts": [v.as_dict() for v in result.verdicts],
                          "report": str(result.html), "json": str(result.json)}, indent=1))
    else:
        for v in result.verdicts:
            print(f"{v.status.upper():>13}  {v.name:<18} {v.message}")
        print(f"report: {result.html}\njson:   {result.json}")
    if result.failed:
        from ..loadtest.verdicts import summary_line

        print(f"corevo-obs: loadtest: {summary_line(result.verdicts)}", file=sys.stderr)
        return 1
    return 0
