"""A scraper with a janitor, like the process that serves ``/metrics``.

    mp_scraper.py --interval 0.05 --janitor 0.2

Scrapes the directory (``LockedMultiProcessCollector`` + ``generate_latest``) every
``--interval`` seconds until a line arrives on stdin, checking that no counter-like sample
ever decreases, and prints one JSON line: scrapes, decreases, file counts, collect times
(wall and CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from corevo_obs.mpdir import Janitor, LockedMultiProcessCollector

MONOTONIC_SUFFIXES = ("_total", "_count", "_sum", "_bucket")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--janitor", type=float, default=0.2)
    args = ap.parse_args()
    d = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    reg = CollectorRegistry()
    LockedMultiProcessCollector(reg, path=str(d))
    janitor = Janitor(d, interval=args.janitor).start()
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
    print(json.dumps({"ready": True}), flush=True)
    last: dict[str, float] = {}
    decreases: list[str] = []
    times: list[float] = []
    cpu: list[float] = []  # CPU of the scrape itself: wall time also counts lock waits
    files: list[int] = []
    t_start = time.monotonic()
    next_at = t_start
    while not stop.is_set():
        n_files = sum(1 for n in os.listdir(d) if n.endswith(".db"))
        t0, c0 = time.perf_counter(), time.thread_time()
        body = generate_latest(reg).decode()
        times.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
        files.append(n_files)
        for line in body.splitlines():
            if line.startswith("#"):
                continue
            series, _, raw = line.rpartition(" ")
            if series.split("{", 1)[0].endswith(MONOTONIC_SUFFIXES):
                value = float(raw)
                if value < last.get(series, 0.0):
                    decreases.append(f"{series}: {last[series]} -> {value}")
                last[series] = value
        next_at += args.interval  # a fixed rate: a slow scrape does not push the next one
        stop.wait(max(0.0, next_at - time.monotonic()))
    elapsed = time.monotonic() - t_start
    janitor.stop()
    print(json.dumps({
        "scrapes": len(times), "seconds": elapsed, "decreases": decreases[:20],
        "collect_s": times, "collect_cpu_s": cpu, "db_files": files, "janitor_runs": janitor.runs,
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
