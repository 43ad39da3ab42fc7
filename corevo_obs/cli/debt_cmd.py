"""``corevo-obs debt init|check``: the shrink-only import debt of the layer contracts.

``init`` records today's forbidden imports; ``check`` runs the contract and the git
ratchet and prints what was paid off, what remains and what is new. import-linter is
imported only when a subcommand runs, so the rest of the CLI works without it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError

_CONFIG_HELP = "import-linter configuration (default: .importlinter, setup.cfg, pyproject.toml)"


def register(sub: Any) -> None:
    p = sub.add_parser("debt", help="shrink-only import debt of the layer contract")
    debt_sub = p.add_subparsers(dest="debt_command", metavar="ACTION", required=True,
                                parser_class=type(p))
    init = debt_sub.add_parser("init", help="write the debt file from today's violations")
    init.add_argument("--config", metavar="FILE", help=_CONFIG_HELP)
    init.add_argument("--force", action="store_true", help="overwrite an existing debt file")
    init.set_defaults(func=run_init)
    check = debt_sub.add_parser("check", help="run the contract and the git ratchet")
    check.add_argument("--config", metavar="FILE", help=_CONFIG_HELP)
    check.add_argument(
        "--base", metavar="REV",
        help="git revision to ratchet against (default: merge base with the default branch; "
        "'none' disables)",
    )
    check.set_defaults(func=run_check)


def _runner() -> Any:
    try:
        from ..tooling.importcontract import runner
    except ImportError as exc:
        raise ConfigError(
            f"import-linter is not installed ({exc}): pip install 'corevo-obs[contracts]'"
        ) from None
    return runner


def run_init(args: argparse.Namespace) -> int:
    from ..tooling.importcontract.debt import render_debt

    for contract, violations in _runner().current_violations(args.config):
        path = Path(str(contract.debt_file))
        if path.exists() and not args.force:
            raise ConfigError("debt file exists; use --force to rewrite it", source=str(path))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render_debt({e: v.lines for e, v in violations.items()}),
                        encoding="utf-8")
        print(f"{contract.name}: wrote {len(violations)} debt entries to {path}")
    return 0


def run_check(args: argparse.Namespace) -> int:
    failed = False
    for name, outcome in _runner().check(args.config, args.base):
        status = "KEPT" if outcome.kept else "BROKEN"
        print(
            f"{name}: {status}: paid off {len(outcome.paid_off)}, "
            f"remaining {len(outcome.remaining)}, new {len(outcome.new)}, "
            f"stale {len(outcome.stale)}, added {len(outcome.added)} "
            f"[{outcome.baseline.note}]"
        )
        for entry in outcome.paid_off:
            print(f"  paid off: {entry}")
        for line in outcome.warnings:
            if line != outcome.baseline.note:
                print(f"  note: {line}")
        for problem in outcome.problems():
            print(f"  error: {problem}")
        failed = failed or not outcome.kept
    return 1 if failed else 0
