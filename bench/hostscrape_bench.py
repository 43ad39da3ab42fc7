"""Scrape of the host endpoint (issue 34 item 4): 8 workers x 20 kinds x default buckets.

Builds a real multiprocess directory: ``--workers`` processes, each with loop health
installed and a ``StageRecorder`` that ran tasks of ``--kinds`` kinds (real
prometheus_client writers, the catalog's default buckets), alive while the scrapes run
(``--busy N``: each keeps running N tasks a second, so values move between scrapes).
Then three endpoints serve that directory at host scope, each in its own process:
``before`` is the code of ``--base`` (default ``main``, a ``git archive`` of it),
``after`` this tree, ``by-worker`` this tree with ``$COREVO_METRICS_BY_WORKER=1``.
Interleaved rounds GET each with Prometheus' own ``Accept`` and ``Accept-Encoding``
headers; printed: samples and bytes per scrape, wall p50/p99, the server's CPU per
scrape (from /proc) and the ratios to ``before``. Target: ``after`` p99 <= 50 ms on a
quiet 2-core box with <= 5,000 samples.

    python bench/hostscrape_bench.py [--workers 8] [--kinds 20] [--rounds 40] [--busy 0]
        [--instructions 3]

``--instructions N`` also counts, under valgrind's callgrind, the instructions of one
warm scrape through the ``after`` and ``by-worker`` endpoints' WSGI app (no HTTP): they
repeat exactly where wall time on a shared machine does not (``before`` is left out: at
~35x the instructions it takes an hour under callgrind on a loaded VM).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: what Prometheus 2.5x / 3.x sends when it scrapes (its default scrape protocols)
PROM_ACCEPT = ("application/openmetrics-text;version=1.0.0;q=0.5,"
               "application/openmetrics-text;version=0.0.1;q=0.4,"
               "text/plain;version=1.0.0;q=0.3,text/plain;version=0.0.4;q=0.2,*/*;q=0.1")


async def _work(kinds: int, tasks: int, busy: float) -> None:
    from corevo_obs.loop import install_loop_health
    from corevo_obs.stages import StageRecorder

    install_loop_health()
    names = [f"route_{k:02d}" for k in range(kinds)]
    rec = StageRecorder(kinds=names)
    rnd = random.Random(os.getpid())

    def one(i: int) -> None:
        t = rec.task(names[i % kinds], accepted_at=time.time() - rnd.expovariate(20))
        t.started()
        t.first_event()
        t.finish(rnd.choice(("completed", "completed", "completed", "failed")))

    for i in range(tasks):
        one(i)
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    done = loop.run_in_executor(None, sys.stdin.read)
    i = 0
    while not done.done():
        if busy:
            one(i)
            i += 1
        await asyncio.wait([done], timeout=1 / busy if busy else None)


def worker(kinds: int, tasks: int, busy: float) -> None:
    """Child mode: one worker writing to ``$PROMETHEUS_MULTIPROC_DIR`` until stdin closes."""
    from corevo_obs import enable_multiprocess

    enable_multiprocess()
    asyncio.run(_work(kinds, tasks, busy))


def serve() -> None:
    """Child mode: a host endpoint of the directory (whichever corevo_obs is on the path)."""
    from corevo_obs.exposition import MetricsServer

    server = MetricsServer(port=0, scope="host").start()
    print(server.port, flush=True)
    sys.stdin.read()
    server.close()


def scrape_in_process(n: int) -> None:
    """Child mode: ``n`` scrapes through the endpoint's WSGI app, no HTTP (for callgrind:
    the difference between two ``n`` is the cost of the scrapes alone)."""
    from prometheus_client import make_wsgi_app

    from corevo_obs.exposition import exposition_registry

    registry = exposition_registry("host")
    try:
        from corevo_obs.fastexpo import make_app
        app = make_app(registry)
    except ImportError:  # the code before: prometheus_client's app
        app = make_wsgi_app(registry)
    environ = {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": "",
               "HTTP_ACCEPT": PROM_ACCEPT, "HTTP_ACCEPT_ENCODING": "gzip"}
    for _ in range(n):
        app(environ, lambda *a: None)


def _instructions(env: dict[str, str], rounds: int) -> float:
    """Instructions of one warm scrape: (1 + rounds scrapes) - (1 scrape), divided."""
    import callgrind  # beside this script

    saved = dict(os.environ)
    os.environ.update(env)
    try:
        one, _ = callgrind.instructions([__file__, "--scrapes", "1"])
        more, _ = callgrind.instructions([__file__, "--scrapes", str(1 + rounds)])
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return (more - one) / rounds


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _scrape(port: int) -> tuple[float, bytes, int]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers={
        "Accept": PROM_ACCEPT, "Accept-Encoding": "gzip"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=60) as resp:
        raw = resp.read()
        zipped = resp.headers.get("Content-Encoding") == "gzip"
    took = time.perf_counter() - t0
    return took, gzip.decompress(raw) if zipped else raw, len(raw)


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def _base_tree(ref: str, into: Path) -> Path:
    """``corevo_obs`` of ``ref``, unpacked under ``into`` (a path to put first)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "corevo_obs"],
                             check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--kinds", type=int, default=20)
    ap.add_argument("--tasks", type=int, default=2000, help="tasks each worker runs first")
    ap.add_argument("--busy", type=float, default=0.0, help="tasks/s each worker keeps running")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--base", default="main", help="git ref of the 'before' code")
    ap.add_argument("--instructions", type=int, default=0, metavar="N",
                    help="also count instructions per warm scrape under callgrind (N scrapes)")
    ap.add_argument("--realtime", action="store_true",
                    help="run the endpoints and the scraper at SCHED_FIFO priority 10 (a "
                         "stand-in for a quiet box on a shared one; needs CAP_SYS_NICE)")
    ap.add_argument("--scrapes", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.kinds, args.tasks, args.busy)
        return 0
    if args.serve:
        serve()
        return 0
    if args.scrapes:
        scrape_in_process(args.scrapes)
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="corevo-hostscrape-"))
    d = tmp / "metrics"
    d.mkdir()
    base = _base_tree(args.base, Path(tempfile.mkdtemp(dir=tmp)))
    env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=str(d), COREVO_LOOP_LOG_INTERVAL="3600")
    here = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    procs: list[subprocess.Popen[str]] = []

    def child(extra_env: dict[str, str], *flags: str) -> subprocess.Popen[str]:
        rt = ["chrt", "-f", "10"] if args.realtime and "--serve" in flags else []
        p = subprocess.Popen(
            [*rt, sys.executable, __file__, *flags, "--kinds", str(args.kinds), "--tasks",
             str(args.tasks), "--busy", str(args.busy)],
            env=dict(env, **extra_env), text=True, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        procs.append(p)
        return p

    try:
        workers = [child({"PYTHONPATH": here, "COREVO_WORKER": f"w{i}"}, "--worker")
                   for i in range(args.workers)]
        for w in workers:
            assert w.stdout is not None and w.stdout.readline().strip() == "ready"
        variants = {
            "before": child({"PYTHONPATH": os.pathsep.join([str(base), here])}, "--serve"),
            "after": child({"PYTHONPATH": here}, "--serve"),
            "by-worker": child({"PYTHONPATH": here, "COREVO_METRICS_BY_WORKER": "1"},
                               "--serve"),
        }
        ports = {}
        for name, p in variants.items():
            assert p.stdout is not None
            ports[name] = int(p.stdout.readline())
        if args.realtime:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))
        first = {name: _scrape(port) for name, port in ports.items()}  # cold: layouts
        walls: dict[str, list[float]] = {name: [] for name in ports}
        cpu: dict[str, float] = dict.fromkeys(ports, 0.0)
        body: dict[str, tuple[bytes, int]] = {}
        order = list(ports)
        for r in range(args.rounds):
            for name in order if r % 2 == 0 else order[::-1]:
                c0 = _cpu_seconds(variants[name].pid)
                took, text, wire = _scrape(ports[name])
                cpu[name] += _cpu_seconds(variants[name].pid) - c0
                walls[name].append(took)
                body[name] = (text, wire)
        load = os.getloadavg()
        if args.realtime:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        print(f"{args.workers} workers x {args.kinds} kinds, default buckets, busy "
              f"{args.busy}/s per worker, {args.rounds} interleaved rounds"
              f"{' at SCHED_FIFO' if args.realtime else ''}, load "
              f"{load[0]:.1f} {load[1]:.1f}, base {args.base}")
        print(f"{'variant':<10} {'samples':>8} {'bytes':>10} {'gzip':>8} {'first ms':>9} "
              f"{'p50 ms':>8} {'p99 ms':>8} {'cpu ms':>7} {'p50 x':>6} {'p99 x':>6}")
        b50, b99 = _pct(walls["before"], 0.5), _pct(walls["before"], 0.99)
        for name in order:
            text, wire = body[name]
            samples = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
            p50, p99 = _pct(walls[name], 0.5), _pct(walls[name], 0.99)
            print(f"{name:<10} {samples:>8,} {len(text):>10,} {wire:>8,} "
                  f"{first[name][0] * 1e3:>9.1f} {p50 * 1e3:>8.1f} {p99 * 1e3:>8.1f} "
                  f"{cpu[name] / args.rounds * 1e3:>7.1f} {b50 / p50:>6.1f} {b99 / p99:>6.1f}")
        ratios = [b / a for b, a in zip(walls["before"], walls["after"], strict=True)]
        print(f"median of per-round ratios before/after: {statistics.median(ratios):.1f}")
        if args.instructions:  # not "before": ~35x the instructions, an hour in callgrind
            counts = {name: _instructions(
                {**env, "PYTHONPATH": here,
                 **({"COREVO_METRICS_BY_WORKER": "1"} if name == "by-worker" else {})},
                args.instructions) for name in ("after", "by-worker")}
            print("instructions per warm scrape (callgrind, no HTTP): " + ", ".join(
                f"{name} {n / 1e6:,.1f} M" for name, n in counts.items()))
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
