"""Scrape cost after N dead writers: plain prometheus_client vs compacted (issue 11: >= 20x).

Dead writers are real forked processes (a quarter end without exit hooks, like SIGKILL)
writing a labelled counter, a histogram and a live gauge, as a worker does. At each step
the plain directory is copied and the copy compacted; then ``collect + generate_latest``
runs on both in interleaved rounds and the medians are compared. Four live writers hold
their files in both directories throughout.

    python bench/compaction_bench.py [--steps 250,500,1000,2000] [--rounds 15]
"""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from corevo_obs.mpdir import LockedMultiProcessCollector, compact_backlog


def _worker_metrics() -> tuple[object, object, object]:
    from prometheus_client import Counter, Gauge, Histogram

    from corevo_obs.core.catalog import LAG_BUCKETS

    c = Counter("bench_requests_total", "requests", ["worker", "outcome"], registry=None)
    h = Histogram("bench_latency_seconds", "latency", ["worker"], buckets=LAG_BUCKETS,
                  registry=None)
    g = Gauge("bench_in_flight", "in flight", ["worker"], multiprocess_mode="livesum",
              registry=None)
    return c, h, g


def generate(count: int, start: int) -> None:
    """Child mode: fork ``count`` writers that write and die (every 4th without hooks)."""
    from corevo_obs import enable_multiprocess

    enable_multiprocess()
    c, h, g = _worker_metrics()
    for i in range(start, start + count):
        pid = os.fork()
        if pid == 0:
            w = f"w{i % 4}"
            for k in range(5):
                c.labels(w, "ok" if k else "error").inc()  # type: ignore[attr-defined]
                h.labels(w).observe(0.003 * k)  # type: ignore[attr-defined]
            g.labels(w).set(1)  # type: ignore[attr-defined]
            if i % 4:
                atexit._run_exitfuncs()
            os._exit(0)
        os.waitpid(pid, 0)


def hold() -> None:
    """Child mode: a live writer that keeps its files until stdin closes."""
    from corevo_obs import enable_multiprocess

    enable_multiprocess()
    c, h, g = _worker_metrics()
    c.labels("w0", "ok").inc()  # type: ignore[attr-defined]
    h.labels("w0").observe(0.01)  # type: ignore[attr-defined]
    g.labels("w0").set(1)  # type: ignore[attr-defined]
    print("ready", flush=True)
    sys.stdin.read()


def _child(env: dict[str, str], *args: str, stdin: int | None = None,
           stdout: int | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, __file__, *args], env=env, text=True,
                            stdin=stdin, stdout=stdout)


def scrape_seconds(collector: type, d: Path) -> float:
    reg = CollectorRegistry()
    collector(reg, path=str(d))
    gc.collect()
    t0 = time.perf_counter()
    generate_latest(reg)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", default="250,500,1000,2000")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    steps = [int(s) for s in args.steps.split(",")]
    root = Path(tempfile.mkdtemp(prefix="corevo-compaction-bench-"))
    plain = root / "plain"
    plain.mkdir()
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(plain), COREVO_COMPACT_AT_EXIT="0")
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent.parent),
                                         env.get("PYTHONPATH", "")])
    holders = [_child(env, "--hold", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
               for _ in range(4)]
    for h in holders:
        assert h.stdout is not None and h.stdout.readline().strip() == "ready"
    print(f"{'dead':>6} {'files plain':>11} {'compacted':>9} {'plain ms':>9} "
          f"{'compacted ms':>12} {'speedup':>8} {'compaction ms':>13}")
    made, results = 0, []
    try:
        for n in steps:
            subprocess.run([sys.executable, __file__, "--generate", str(n - made), str(made)],
                           env=env, check=True)
            made = n
            packed = root / f"compacted-{n}"
            shutil.copytree(plain, packed)
            res = compact_backlog(packed)
            a: list[float] = []
            b: list[float] = []
            for _ in range(args.rounds):  # interleaved: drift hits both alike
                a.append(scrape_seconds(MultiProcessCollector, plain))
                b.append(scrape_seconds(LockedMultiProcessCollector, packed))
            pa, pb = statistics.median(a), statistics.median(b)
            results.append((n, pa, pb))
            nfiles = [sum(1 for x in p.iterdir() if x.suffix == ".db") for p in (plain, packed)]
            print(f"{n:>6} {nfiles[0]:>11} {nfiles[1]:>9} {pa * 1e3:>9.2f} {pb * 1e3:>12.2f} "
                  f"{pa / pb:>7.1f}x {res.seconds * 1e3:>13.1f}")
    finally:
        for h in holders:
            h.communicate("")
        shutil.rmtree(root, ignore_errors=True)
    (n0, _, c0), (n1, p1, c1) = results[0], results[-1]
    print(f"\ncompacted scrape at {n1} vs {n0} dead writers: {c1 / c0:.2f}x (flat = 1.0); "
          f"speedup at {n1}: {p1 / c1:.1f}x (target >= 20x)")
    return 0


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--generate":
        generate(int(sys.argv[2]), int(sys.argv[3]))
    elif len(sys.argv) >= 2 and sys.argv[1] == "--hold":
        hold()
    else:
        sys.exit(main())
