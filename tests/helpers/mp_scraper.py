"""A scraper with a janitor, like the process that serves ``/metrics``.

    mp_scraper.py --interval 0.05 --janitor 0.2 [--plain]

Scrapes the directory (``LockedMultiProcessCollector`` + ``generate_latest``; with
``--plain`` an unmodified ``MultiProcessCollector``) every ``--interval`` seconds until a
line arrives on stdin, checking that no counter-like sample ever decreases, and prints one
JSON line: scrapes, decreases, failed scrapes (and their exception types), file counts,
collect times (wall and CPU), each scrape's monotonic start/end and its
``mpt_events_total`` / histogram count totals. ``--janitor 0`` runs no janitor.
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
from prometheus_client.multiprocess import MultiProcessCollector

from corevo_obs.mpdir import Janitor, LockedMultiProcessCollector

MONOTONIC_SUFFIXES = ("_total", "_count", "_sum", "_bucket")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--interval", type=float, default=0.05)
    ap.add_argument("--janitor", type=float, default=0.2)
    ap.add_argument("--plain", action="store_true")
    args = ap.parse_args()
    d = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    reg = CollectorRegistry()
    (MultiProcessCollector if args.plain else LockedMultiProcessCollector)(reg, path=str(d))
    janitor = Janitor(d, interval=args.janitor).start() if args.janitor > 0 else None
    stop = threading.Event()

    def wait_for_stdin() -> None:
        sys.stdin.readline()
        stop.set()

    threading.Thread(target=wait_for_stdin, daemon=True).start()
    print(json.dumps({"ready": True}), flush=True)
    last: dict[str, float] = {}
    decreases: list[str] = []
    times: list[float] = []
    cpu: list[float] = []  # CPU of the scrape itself: wall time also counts lock waits
    files: list[int] = []
    spans: list[tuple[float, float]] = []
    events: list[float] = []
    observations: list[float] = []
    errors: list[str] = []
    error_types: dict[str, int] = {}
    t_start = time.monotonic()
    next_at = t_start
    while not stop.is_set():
        n_files = sum(1 for n in os.listdir(d) if n.endswith(".db"))
        t0, c0, m0 = time.perf_counter(), time.thread_time(), time.monotonic()
        try:
            body = generate_latest(reg).decode()
        except Exception as exc:  # noqa: BLE001 - a failed scrape is a finding, not a crash
            errors.append(repr(exc)[:200])
            error_types[type(exc).__name__] = error_types.get(type(exc).__name__, 0) + 1
            body = ""
        times.append(time.perf_counter() - t0)
        cpu.append(time.thread_time() - c0)
        spans.append((m0, time.monotonic()))
        files.append(n_files)
        n_events = n_obs = 0.0
        for line in body.splitlines():
            if line.startswith("#"):
                continue
            series, _, raw = line.rpartition(" ")
            if series.startswith("mpt_events_total"):
                n_events += float(raw)
            elif series == "mpt_latency_seconds_count":
                n_obs += float(raw)
            if series.split("{", 1)[0].endswith(MONOTONIC_SUFFIXES):
                value = float(raw)
                if value < last.get(series, 0.0):
                    decreases.append(f"{series}: {last[series]} -> {value}")
                last[series] = value
        if body:
            events.append(n_events)
            observations.append(n_obs)
        next_at += args.interval  # a fixed rate: a slow scrape does not push the next one
        stop.wait(max(0.0, next_at - time.monotonic()))
    elapsed = time.monotonic() - t_start
    if janitor is not None:
        janitor.close()
    print(json.dumps({
        "scrapes": len(times), "seconds": elapsed, "decreases": decreases[:20],
        "errors": errors[:20], "failed": len(errors),
        "error_types": error_types, "spans": spans, "events": events,
        "observations": observations, "collect_s": times, "collect_cpu_s": cpu,
        "db_files": files, "janitor_runs": janitor.runs if janitor else 0,
    }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
