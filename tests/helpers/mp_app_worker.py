"""An app worker that keeps writing metrics: one steady counter and a new series now and then.

    mp_app_worker.py [--every 0.003] [--new-every 1]

Calls ``enable_multiprocess``, prints ``{"pid": ...}``, then increments
``mpt_events_total{kind="steady"}`` every ``--every`` seconds and adds a new series (a
new entry in its value file, so the file touches fresh pages and grows) every
``--new-every`` increments (printing ``{"series": M}`` every 50 new ones), until a line
arrives on stdin; then prints ``{"steady": N, "series": M}`` (what it wrote) and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time

from corevo_obs import enable_multiprocess


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--every", type=float, default=0.003)
    ap.add_argument("--new-every", type=int, default=1)
    args = ap.parse_args()
    enable_multiprocess()
    from prometheus_client import Counter

    events = Counter("mpt_events_total", "events", ["kind"], registry=None)
    steady = events.labels(kind="steady")
    print(json.dumps({"pid": os.getpid()}), flush=True)
    stop = threading.Event()

    def wait_for_stop() -> None:
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=wait_for_stop, daemon=True).start()
    n = series = 0
    while not stop.is_set():
        steady.inc()
        n += 1
        if n % args.new_every == 0:
            series += 1
            events.labels(kind=f"s{series:06d}").inc()
            if series % 50 == 0:
                print(json.dumps({"series": series}), flush=True)
        time.sleep(args.every)
    print(json.dumps({"steady": n, "series": series}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
