"""Worker churn: fork many short-lived writers, SIGKILL a share of them, report the truth.

    mp_churn.py --total 1000 --batch 25 --kill-every 4 --inc 3

Each child increments a counter and observes a histogram ``--inc`` times, sets a
``livesum`` and a ``max`` gauge, then tells the parent over a pipe. Every
``--kill-every``-th child then waits to be SIGKILLed (no exit hook runs); the others exit
through the normal exit hooks (mark dead, compact above the threshold) and ``os._exit``.
The parent prints one JSON line with what the children actually did.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import signal
import sys
import time

from corevo_obs import enable_multiprocess


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--total", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=25)
    ap.add_argument("--kill-every", type=int, default=4)
    ap.add_argument("--inc", type=int, default=3)
    args = ap.parse_args()
    enable_multiprocess()
    from prometheus_client import Counter, Gauge, Histogram

    counter = Counter("mpt_events_total", "events", ["kind"], registry=None)
    hist = Histogram("mpt_latency_seconds", "latency", registry=None, buckets=(0.1, 0.5, 1.0))
    busy = Gauge("mpt_busy", "busy", registry=None, multiprocess_mode="livesum")
    peak = Gauge("mpt_peak", "peak", registry=None, multiprocess_mode="max")
    sys.stdout.flush()
    started = killed = 0
    t0 = time.monotonic()
    while started < args.total:
        children: list[tuple[int, bool]] = []
        r, w = os.pipe()
        for _ in range(min(args.batch, args.total - started)):
            to_kill = args.kill_every > 0 and started % args.kill_every == 0
            started += 1
            pid = os.fork()
            if pid == 0:  # child
                os.close(r)
                kind = "odd" if os.getpid() % 2 else "even"
                for _ in range(args.inc):
                    counter.labels(kind=kind).inc()
                    hist.observe(0.25)
                busy.set(1)
                peak.set(started)
                os.write(w, b"x")
                if to_kill:
                    signal.pause()
                atexit._run_exitfuncs()  # what a graceful interpreter exit runs
                os._exit(0)
            children.append((pid, to_kill))
        os.close(w)
        got = 0
        while got < len(children):
            chunk = os.read(r, 4096)
            if not chunk:
                break
            got += len(chunk)
        os.close(r)
        for pid, to_kill in children:
            if to_kill:
                os.kill(pid, signal.SIGKILL)
                killed += 1
        for pid, _ in children:
            os.waitpid(pid, 0)
    print(json.dumps({
        "children": started, "killed": killed, "increments": started * args.inc,
        "seconds": time.monotonic() - t0,
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
