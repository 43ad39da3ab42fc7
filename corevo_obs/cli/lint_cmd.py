"""``corevo-obs lint PATHS...``: the blocking-call lint for ``async def`` (docs/lint.md).

Exit 0 when clean, 1 with findings (or a stale baseline entry), 2 on usage errors or a
file that does not parse or cannot be read, a FIFO named ``*.py`` or a folder that
cannot be listed (the other files are still checked and reported).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..tooling.lint import LintConfig, lint_paths, load_catalog, load_config
from ..tooling.lint.baseline import apply_baseline, load_baseline, write_baseline
from ..tooling.lint.cache import ENV, LintCache
from ..tooling.lint.config import FIELDS, FieldError
from ..tooling.lint.formats import as_github, as_json, as_sarif, as_text
from ..tooling.lint.model import CONFIDENCE, Finding
from ..tooling.lint.observed import load_stalls
from ..tooling.lint.rules import message, meta
from ..tooling.lint.runner import LintResult, max_jobs


def _jobs(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return n


def _codes(key: str) -> Any:
    """``--select COB1,COB104``: validated like the config key of the same name."""
    def parse(value: str) -> tuple[str, ...]:
        try:
            return tuple(FIELDS[key][1].parse([v.strip() for v in value.split(",") if v.strip()]))
        except FieldError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    return parse


def _cache(args: argparse.Namespace) -> LintCache | None:
    """--no-cache, else --cache-dir, else $COREVO_LINT_CACHE_DIR, else the project's."""
    if args.no_cache:
        return None
    chosen = args.cache_dir or os.environ.get(ENV)
    if chosen:
        return LintCache.at(chosen)
    root = os.path.dirname(os.path.abspath(args.config)) if args.config else os.getcwd()
    return LintCache.for_project(root)


def register(sub: Any) -> None:
    p = sub.add_parser("lint", help="flag blocking calls inside async def")
    p.add_argument("paths", nargs="*", metavar="PATH",
                   help="files or directories; - reads one file from stdin (--stdin-filename)")
    p.add_argument("--observed", nargs="+", action="extend", default=[], metavar="FILE",
                   help="stall reports (watchdog log or JSON lines, load-test JSON, pytest "
                   "probe output): functions seen blocking become blocking facts")
    p.add_argument("--staged", action="store_true",
                   help="pre-commit: lint PATHs (default: .) whole, report only findings in "
                   "staged files or whose chain passes through one")
    p.add_argument("--format", choices=("text", "json", "sarif", "github"), default="text",
                   help="github: workflow annotations (::error file=...,line=...::msg)")
    p.add_argument("--select", type=_codes("select"), metavar="CODES",
                   help="comma-separated codes or prefixes reported (overrides the config)")
    p.add_argument("--ignore", type=_codes("ignore"), metavar="CODES",
                   help="comma-separated codes not reported (overrides the config)")
    p.add_argument("--min-confidence", choices=CONFIDENCE,
                   help="report findings at least this sure (default: config, else medium)")
    p.add_argument("--exit-zero", action="store_true",
                   help="exit 0 even when there are findings (2 still means a usage error)")
    p.add_argument("--stdin-filename", metavar="PATH",
                   help="with PATH '-': the name the source read from stdin is reported under")
    p.add_argument("--baseline", metavar="FILE",
                   help="hide legacy findings listed in FILE (default: config 'baseline')")
    p.add_argument("--write-baseline", action="store_true",
                   help="write the baseline (a new file lists all; an existing one only shrinks)")
    p.add_argument("--config", metavar="PYPROJECT",
                   help="pyproject.toml with [tool.corevo-obs.lint] (default: ./pyproject.toml)")
    p.add_argument("--follow-installed", action="store_true", default=None,
                   help="follow chains into installed packages (this Python's "
                   "site-packages and the config's 'installed' directories)")
    p.add_argument("--installed", action="append", default=[], metavar="DIR",
                   help="a directory of installed packages chains may enter (repeatable; "
                   "implies --follow-installed)")
    p.add_argument("--jobs", type=_jobs, metavar="N",
                   help="worker processes, at most the CPUs available (default: all)")
    p.add_argument("--cache-dir", metavar="DIR",
                   help=f"where unchanged files' summaries are kept (default: ${ENV}, else "
                   "./.corevo-cache/lint beside the config)")
    p.add_argument("--no-cache", action="store_true",
                   help="parse every file, read and write no cache")
    p.set_defaults(func=run)


def _config(args: argparse.Namespace) -> LintConfig:
    """The config file's values, with the command line's overrides."""
    config = load_config(args.config)
    over = {k: v for k, v in (("select", args.select), ("ignore", args.ignore),
                              ("min_confidence", args.min_confidence),
                              ("follow_installed", args.follow_installed)) if v is not None}
    if args.installed:  # relative to the current directory, not the config's
        over["installed"] = (*config.installed, *(os.path.abspath(d) for d in args.installed))
    return replace(config, **over) if over else config


def _stdin(args: argparse.Namespace, config: LintConfig) -> LintResult:
    """``-``: the source on stdin, linted as one file reported as ``--stdin-filename``
    (chains into other files of the project are not seen: only this file is read)."""
    if args.paths != ["-"]:
        raise ConfigError("'-' (stdin) must be the only path", source="lint")
    name = args.stdin_filename or "stdin.py"
    source = sys.stdin.buffer.read()
    with tempfile.TemporaryDirectory(prefix="corevo-lint-stdin-") as tmp:
        path = Path(tmp, Path(name).name if name.endswith(".py") else "stdin.py")
        path.write_bytes(source)
        result = lint_paths([str(path)], config, jobs=1)
    result.findings = [replace(f, path=name) for f in result.findings]
    result.errors = [replace(f, path=name) for f in result.errors]
    return result


def _staged_files() -> frozenset[str]:
    """Absolute paths of the files staged in the git repository of the current directory."""
    def git(*argv: str) -> str:
        try:
            proc = subprocess.run(["git", *argv], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ConfigError(f"cannot run git: {exc}", source="--staged") from None
        if proc.returncode != 0:
            why = (proc.stderr.strip().splitlines() or ["git failed"])[-1]
            raise ConfigError(why, source="--staged")
        return proc.stdout
    top = git("rev-parse", "--show-toplevel").strip()
    names = git("diff", "--cached", "--name-only", "--diff-filter=ACMR", "-z").split("\0")
    return frozenset(os.path.join(top, n) for n in names if n)


def _touches(f: Finding, staged: frozenset[str]) -> bool:
    """The finding is in a staged file, or its chain passes through one."""
    return any(os.path.realpath(p) in staged for p in (f.path, *f.via))


def run(args: argparse.Namespace) -> int:
    if not args.paths:
        if not args.staged:
            raise ConfigError("give a PATH (or --staged)", source="lint")
        args.paths = ["."]
    staged = _staged_files() if args.staged else None
    config = _config(args)
    catalog = load_catalog(config)
    if args.jobs is not None and args.jobs > max_jobs():
        print(f"corevo-obs: note: --jobs {args.jobs} capped at {max_jobs()} (the CPUs "
              "available)", file=sys.stderr)
    if args.stdin_filename is not None and args.paths != ["-"]:
        raise ConfigError("--stdin-filename needs the path '-'", source="lint")
    cache = None if "-" in args.paths else _cache(args)
    if "-" in args.paths:
        result = _stdin(args, config)
    else:
        stalls = load_stalls(args.observed) if args.observed else []
        result = lint_paths(args.paths, config, jobs=args.jobs, catalog=catalog, cache=cache,
                            stalls=stalls)
        for stall in result.unmatched:
            print(f"corevo-obs: note: {stall.origin}: the stall at "
                  f"{stall.frames[-1] if stall.frames else '?'} is in no sync function of "
                  "the linted tree", file=sys.stderr)
    if cache is not None and cache.note:
        print(f"corevo-obs: note: {cache.note}", file=sys.stderr)
    least = CONFIDENCE.index(config.min_confidence)
    findings = [f for f in result.findings if CONFIDENCE.index(f.confidence) >= least]
    if staged is not None:
        staged = frozenset(os.path.realpath(p) for p in staged)
        findings = [f for f in findings if _touches(f, staged)]
        result.errors = [f for f in result.errors if _touches(f, staged)]
    baseline_path = args.baseline or config.baseline
    if args.write_baseline:
        if not baseline_path:
            print("corevo-obs: error: --write-baseline needs --baseline FILE", file=sys.stderr)
            return 2
        exists = os.path.lexists(baseline_path)  # a folder or FIFO there is an error, not "new"
        previous = load_baseline(baseline_path) if exists else None
        kept = write_baseline(baseline_path, findings, previous)
        print(f"baseline {baseline_path}: {kept} entries", file=sys.stderr)
        findings, _ = apply_baseline(findings, load_baseline(baseline_path))
    elif baseline_path:
        findings, stale = apply_baseline(findings, load_baseline(baseline_path))
        findings += [
            Finding(baseline_path, 1, 1, meta.STALE, message(
                meta.STALE, entry=f"{code} in {path} {context}: {snippet}"))
            for path, code, context, snippet in stale
        ]
    shown = sorted([*result.errors, *findings])
    if args.format == "json":
        sys.stdout.write(as_json(shown))
    elif args.format == "sarif":
        from .. import __version__  # importlib.metadata: only for SARIF

        sys.stdout.write(as_sarif(shown, __version__))
    elif args.format == "github":
        sys.stdout.write(as_github(shown))
    else:
        sys.stdout.write(as_text(shown))
        cached = ""
        if cache is not None:
            cached = (", none changed (cache)" if cache.stats.trees
                      else f", {cache.stats.hits} unchanged (cache)")
        print(f"{len(findings)} finding(s), {len(result.errors)} unparsable, "
              f"{result.files} file(s) checked{cached}", file=sys.stderr)
    if result.errors:
        return 2
    return 1 if findings and not args.exit_zero else 0
