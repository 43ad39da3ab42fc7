"""A scraper with a janitor, like the process that serves ``/metrics``.

    mp_scraper.py --interval 0.05 --janitor 0.2

Scrapes the directory (``LockedMultiProcessCollector`` + ``generate_latest``) every
``--interval`` seconds until a line arrives on stdin, checking that no counter-like sample
ever decreases, and prints one JSON line: scrapes, decreases, file counts, collect times.
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
from prometheus_client.parser import text_string_to_metric_families

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
    last: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    decreases: list[str] = []
    times: list[float] = []
    files: list[int] = []
    t_start = time.monotonic()
    while not stop.is_set():
        n_files = sum(1 for n in os.listdir(d) if n.endswith(".db"))
        t0 = time.perf_counter()
        body = generate_latest(reg).decode()
        times.append(time.perf_counter() - t0)
        files.append(n_files)
        for fam in text_string_to_metric_families(body):
            for s in fam.samples:
                if not s.name.endswith(MONOTONIC_SUFFIXES):
                    continue
                key = (s.name, tuple(sorted(s.labels.items())))
                if s.value < last.get(key, 0.0):
                    decreases.append(f"{key}: {last[key]} -> {s.value}")
                last[key] = s.value
        stop.wait(args.interval)
    elapsed = time.monotonic() - t_start
    janitor.stop()
    print(json.dumps({
        "scrapes": len(times), "seconds": elapsed, "decreases": decreases[:20],
        "collect_s": times, "db_files": files, "janitor_runs": janitor.runs,
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
