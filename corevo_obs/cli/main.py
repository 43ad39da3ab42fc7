"""Entry point: parse, dispatch, and turn every expected failure into a message + exit code.

Each subcommand lives in its own module under ``corevo_obs.cli`` and exposes
``register(subparsers)``; it sets ``func(args) -> int`` on its parser. Library code never
prints or exits: errors arrive here as ``CorevoObsError`` and leave as one clear line;
so does an ``OSError`` nobody caught (naming its path), and even a bug of ours (exit 3,
the traceback only with ``COREVO_OBS_DEBUG=1``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from ..core.errors import CorevoObsError

DEBUG_ENV = "COREVO_OBS_DEBUG"
# command -> its module; a run of one command imports only that module (``lint`` does
# not pay for prometheus_client or the metrics directory code)
COMMANDS: dict[str, str] = {
    "catalog": "corevo_obs.cli.catalog_cmd",
    "dashboards": "corevo_obs.cli.dashboards_cmd",
    "demo": "corevo_obs.cli.demo_cmd",
    "lint": "corevo_obs.cli.lint_cmd",
    "metrics": "corevo_obs.cli.metrics_cmd",
    "dump": "corevo_obs.cli.dump_cmd",
    "debt": "corevo_obs.cli.debt_cmd",
    "leases": "corevo_obs.cli.leases_cmd",
    "export": "corevo_obs.cli.export_cmd",
    "loadtest": "corevo_obs.cli.loadtest_cmd",
}
COMMAND_MODULES: tuple[str, ...] = tuple(COMMANDS.values())


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's exit code 2, with our prefix
        self.print_usage(sys.stderr)
        self.exit(2, f"corevo-obs: error: {message}\n")


class _Version(argparse.Action):
    """``--version``, looked up only when asked (importlib.metadata costs every run)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS,
                 default: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest=dest, default=default, nargs=0,
                         help=help or "show program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from .. import __version__

        print(f"corevo-obs {__version__}")
        parser.exit()


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The CLI's parser; with ``command`` (a key of ``COMMANDS``) only that subcommand's."""
    parser = _Parser(
        prog="corevo-obs",
        description="Observability and diagnostics for asyncio services that run as many "
        "processes, event loops and thread pools. Start with `corevo-obs demo`.",
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in [COMMANDS[command]] if command in COMMANDS else COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        words = list(sys.argv[1:] if argv is None else argv)
        # the command's module only (all of them for --help or a wrong name): Ctrl-C may
        # land here
        parser = build_parser(words[0] if words else None)
        args = parser.parse_args(argv)
        func = getattr(args, "func", None)
        if func is None:
            parser.print_help(sys.stderr)
            return 2
        return int(func(args) or 0)
    except KeyboardInterrupt:
        print("corevo-obs: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # a path a command did not anticipate (or UnsafeEntry): one line
        where = f"{exc.filename}: " if exc.filename else ""
        return _fail(f"{where}{exc.strerror or exc}", 2)
    except CorevoObsError as exc:
        return _fail(str(exc), exc.exit_code)
    except Exception as exc:  # noqa: BLE001 - a bug of ours: one line, the trace on request
        if os.environ.get(DEBUG_ENV) == "1":
            raise
        return _fail(f"internal error {type(exc).__name__}: {exc} "
                     f"(set {DEBUG_ENV}=1 for the traceback)", 3)


def _fail(message: str, code: int) -> int:
    """One line on stderr, whatever the message holds (a path with a newline, say)."""
    print(f"corevo-obs: error: {' '.join(message.splitlines())}", file=sys.stderr)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
