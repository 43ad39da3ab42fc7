"""A multiprocess writer: counter, histogram and one gauge per mode, then exit or hold.

    mp_writer.py --inc 3 --observe 0.25 --gauge 7 [--hold] [--cue]

With ``--hold`` it prints ``{"pid": ...}`` once written and waits for a line on stdin
(or for SIGKILL), so a test controls exactly when it dies and what it has written.
With ``--cue`` it prints ``{"pid": ...}`` once registered and waits for a line before its
first write (a test decides what the disk is like when its value files are created).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Literal, get_args

from corevo_obs import enable_multiprocess

Mode = Literal["all", "liveall", "sum", "livesum", "max", "livemax", "min", "livemin",
               "mostrecent", "livemostrecent"]
MODES: tuple[Mode, ...] = get_args(Mode)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--inc", type=int, default=1)
    ap.add_argument("--observe", type=float, default=0.25)
    ap.add_argument("--gauge", type=float, default=1.0)
    ap.add_argument("--label", default="a")
    ap.add_argument("--hold", action="store_true")
    ap.add_argument("--cue", action="store_true")
    args = ap.parse_args()
    enable_multiprocess()
    if args.cue:
        print(json.dumps({"pid": __import__("os").getpid()}), flush=True)
        sys.stdin.readline()
    from prometheus_client import Counter, Gauge, Histogram, Summary

    c = Counter("mpt_events_total", "events", ["kind"], registry=None).labels(kind=args.label)
    h = Histogram("mpt_latency_seconds", "latency", registry=None, buckets=(0.1, 0.5, 1.0))
    s = Summary("mpt_size_bytes", "size", registry=None)
    for _ in range(args.inc):
        c.inc()
        h.observe(args.observe)
        s.observe(args.observe)
    for mode in MODES:
        Gauge(f"mpt_g_{mode}", mode, registry=None, multiprocess_mode=mode).set(args.gauge)
    if args.hold:
        print(json.dumps({"pid": __import__("os").getpid()}), flush=True)
        sys.stdin.readline()
    return 0


if __name__ == "__main__":
    sys.exit(main())
