"""A worker for host-aggregate tests: task stages, a counter and a gauge of every mode.

    host_worker.py --kinds a,b --tasks 5

Records ``--tasks`` tasks per kind through a ``StageRecorder`` (the catalog's stage
histograms, per worker) plus ``mp_writer``-like metrics, prints ``{"pid": ...}`` and then
obeys stdin lines: ``tasks KIND N`` records N more tasks of KIND (a new kind grows its
files) and answers ``ok``; end of input exits.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from corevo_obs import enable_multiprocess


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kinds", default="a,b")
    ap.add_argument("--tasks", type=int, default=5)
    args = ap.parse_args()
    enable_multiprocess()
    from prometheus_client import Counter, Gauge

    from corevo_obs.stages import StageRecorder

    rec = StageRecorder()
    events = Counter("hw_events_total", "events", ["worker", "kind"], registry=None)
    worker = os.environ["COREVO_WORKER"]
    n = 0

    def run(kind: str, count: int) -> None:
        nonlocal n
        for _ in range(count):
            n += 1
            t = rec.task(kind)
            t.started()
            with t.external("db"):
                pass
            t.first_event()
            t.finish("completed" if n % 3 else "failed")
            events.labels(worker=worker, kind=kind).inc()

    for kind in args.kinds.split(","):
        run(kind, args.tasks)
    for mode in ("all", "liveall", "sum", "livesum", "max", "livemax", "min", "livemin",
                 "mostrecent", "livemostrecent"):
        Gauge(f"hw_g_{mode}", mode, registry=None, multiprocess_mode=mode).set(os.getpid() % 7)
    print(json.dumps({"pid": os.getpid()}), flush=True)
    for line in sys.stdin:
        _, kind, count = line.split()
        run(kind, int(count))
        print("ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
