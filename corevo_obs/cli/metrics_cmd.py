"""``corevo-obs metrics compact|status DIR``: the multiprocess directory from cron or a shell.

``compact`` exits 0 when done, 1 when it left files in place (corrupt, not a regular
file, unreadable, or under an unreadable accumulator: each named on stderr), 2 on a bad
directory (missing, not a directory, a link planted as its state, unwritable state, a
full disk), 3 when another compaction held the lock for ``--wait`` seconds (``--no-wait``:
at all).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from dataclasses import asdict
from functools import wraps
from typing import Any

from ..core.untrusted import printable
from ..mpdir.compactor import compact_backlog
from ..mpdir.lock import COMPACT_WAIT, LockBusy
from ..mpdir.status import DirStatus, scan
from .metrics_serve import add_parser as add_serve_parser


def register(sub: Any) -> None:
    p = sub.add_parser("metrics", help="inspect or compact a multiprocess metrics directory")
    msub = p.add_subparsers(dest="metrics_command", metavar="ACTION", required=True)
    c = msub.add_parser("compact", help="fold dead writers' files into accumulators")
    c.add_argument("dir", metavar="DIR")
    c.add_argument("--no-wait", action="store_true", help="exit 3 if a compaction is running")
    c.add_argument("--wait", type=_seconds, default=COMPACT_WAIT, metavar="SECONDS",
                   help=f"exit 3 if another compaction still runs after this long "
                        f"(default {COMPACT_WAIT:.0f})")
    c.set_defaults(func=run_compact)
    s = msub.add_parser("status", help="files, bytes, live and dead writers")
    s.add_argument("dir", metavar="DIR")
    s.add_argument("--format", choices=("text", "json"), default="text")
    s.set_defaults(func=run_status)
    add_serve_parser(msub)


def _fs_errors(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """A file system refusal (permissions, a file where ``.corevo/`` should be) is a bad
    directory: one line and exit 2, like a missing one."""

    @wraps(run)
    def wrapper(args: argparse.Namespace) -> int:
        try:
            return run(args)
        except OSError as exc:
            where = exc.filename if exc.filename is not None else args.dir
            print(f"corevo-obs: error: {where}: {exc.strerror or exc}", file=sys.stderr)
            return 2

    return wrapper


def _seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds >= 0, got {raw!r}")
    return value


@_fs_errors
def run_compact(args: argparse.Namespace) -> int:
    try:
        res = compact_backlog(args.dir, blocking=not args.no_wait, wait=args.wait)
    except LockBusy:
        waited = "" if args.no_wait else f" (waited {args.wait:g} s)"
        print(f"corevo-obs: another compaction is running{waited}", file=sys.stderr)
        return 3
    print(
        f"compacted {len(res.dead_writers)} dead writers: {res.folded_files} files folded "
        f"into {res.accumulators} accumulators, {res.dropped_files} live-gauge files dropped "
        f"in {res.seconds * 1000:.1f} ms" + (" (finished an interrupted compaction)"
                                              if res.recovered else "")
    )
    if res.unreadable:
        for path in res.unreadable:
            why = res.reasons.get(path, "unreadable")
            # names and reasons come from a directory others can write: one line each
            print(f"corevo-obs: left in place: {printable(path)}: {printable(why)}",
                  file=sys.stderr)
        return 1
    return 0


def status_dict(st: DirStatus) -> dict[str, Any]:
    return {
        "path": str(st.path),
        "files": st.files,
        "metric_files": st.metric_files,
        "accumulators": st.accumulators,
        "bytes": st.bytes,
        "live_writers": st.live_writers,
        "dead_writers": {str(pid): s.value for pid, s in st.dead_writers.items()},
        "journal_pending": st.journal_pending,
        "compactions": asdict(st.stats),
    }


@_fs_errors
def run_status(args: argparse.Namespace) -> int:
    st = scan(args.dir)
    if args.format == "json":
        print(json.dumps(status_dict(st), indent=2))
        return 0
    reasons: dict[str, int] = {}
    for s in st.dead_writers.values():
        reasons[s.value] = reasons.get(s.value, 0) + 1
    detail = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items()))
    print(f"directory     {st.path}")
    print(f"files         {st.files} ({st.metric_files} metric files, "
          f"{st.accumulators} accumulators), {st.bytes} bytes")
    print(f"live writers  {len(st.live_writers)}")
    print(f"dead writers  {len(st.dead_writers)}" + (f" ({detail})" if detail else ""))
    print(f"compactions   {st.stats.compactions}, last took {st.stats.last_seconds * 1000:.1f} ms"
          + ("; an interrupted compaction is pending" if st.journal_pending else ""))
    return 0
