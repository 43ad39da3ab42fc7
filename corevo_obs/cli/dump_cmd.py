"""``corevo-obs dump PID``: a worker's stacks via py-spy, the event-loop thread first."""

from __future__ import annotations

import argparse
import json
from typing import Any


def _pid(raw: str) -> int:
    try:
        pid = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a process id: {raw!r}") from None
    if pid <= 0:
        raise argparse.ArgumentTypeError(f"not a process id: {raw!r}")
    return pid


def _seconds(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 < value <= 600:
        raise argparse.ArgumentTypeError(
            f"timeout must be more than 0 and at most 600 seconds, got {raw!r}")
    return value


def register(sub: Any) -> None:
    p = sub.add_parser(
        "dump", help="print a worker's thread stacks with py-spy (event-loop thread first)"
    )
    p.add_argument("pid", type=_pid, metavar="PID")
    p.add_argument("--timeout", type=_seconds, default=5.0, help="seconds (default 5)")
    p.add_argument("--native", action="store_true", help="include C frames")
    p.add_argument("--all", action="store_true", help="all threads, not only the loop's")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--project-root", action="append", default=[], metavar="DIR",
                   help="only files under DIR count as project code (repeatable)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..integrations.pyspy import dump

    d = dump(args.pid, args.timeout, native=args.native, project_roots=args.project_root)
    loop = d.loop_thread
    threads = d.threads if args.all or loop is None else (loop,)
    if args.json:
        print(json.dumps({
            "pid": d.pid,
            "threads": [{
                "thread_id": t.thread_id, "name": t.name, "event_loop": t.is_loop,
                "active": t.active, "owns_gil": t.owns_gil,
                "culprit": None if t.culprit is None else str(t.culprit),
                "frames": [str(f) for f in t.frames],
            } for t in threads],
        }, indent=2))
        return 0
    if loop is None:
        print(f"process {d.pid}: no thread is running an asyncio event loop")
    more = len(d.threads) - len(threads)
    print(f"process {d.pid}: {len(d.threads)} thread(s)")
    for t in threads:
        print(t.format())
    if more:
        print(f"({more} more thread(s): --all)")
    return 0
