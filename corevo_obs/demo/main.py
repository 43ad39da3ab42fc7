"""Run the demo: spawn workers, run the drills, print a diagnosis (text or JSON)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

from ..errors import ConfigError
from .slow_upstream import SlowUpstream


def _spawn(worker: str, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "corevo_obs.demo.worker", "--worker", worker, *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def drill_frozen_worker(workers: int, freeze: float, env: dict[str, str]) -> dict[str, Any]:
    """Drill 1: one worker runs a sync HTTP call inside async def; who froze, and where?"""
    with SlowUpstream(freeze) as upstream:
        names = [f"w{i}" for i in range(workers)]
        bad = names[1 % workers]
        procs = {
            n: _spawn(n, env, *(["--blocking-url", upstream.url] if n == bad else []))
            for n in names
        }
        results = {}
        for n, p in procs.items():
            out, err = p.communicate(timeout=60)
            if p.returncode != 0:
                raise ConfigError(f"demo worker {n} failed:\n{err.strip()}", source="demo")
            results[n] = json.loads(out.strip().splitlines()[-1])
    frozen = [n for n, r in results.items() if r["stalls"]]
    diagnosis: dict[str, Any] = {"injected_worker": bad, "frozen_workers": frozen}
    if frozen:
        worst = max((s for n in frozen for s in results[n]["stalls"]),
                    key=lambda s: s["duration_seconds"])
        diagnosis["stall"] = worst
    diagnosis["workers"] = results
    return diagnosis


def _print_text(report: dict[str, Any]) -> None:
    d1 = report["drills"]["frozen_worker"]
    print("Drill 1: sync I/O inside async def")
    if "stall" in d1:
        s = d1["stall"]
        c = s["culprit"]
        where = f"{c['file']}:{c['line']} in {c['function']}" if c else "(stack not captured)"
        print(f"  frozen worker : {s['worker']} for {s['duration_seconds']:.3f}s")
        print(f"  blocking line : {where}")
    else:
        print("  no stall detected")
    for n, r in d1["workers"].items():
        print(
            f"  {n}: max lag {r['max_lag_seconds']:.3f}s, unrelated heartbeat max gap "
            f"{r['heartbeat_max_gap_seconds']:.3f}s, fake model median "
            f"{r['model_latency_median_seconds']}s"
        )
    print("  -> the unrelated heartbeat stalled only on the frozen worker while the model's")
    print("     latency stayed flat: the loop was blocked, the model was not slow.")


def run_demo(*, workers: int = 3, as_json: bool = False, short: bool = False) -> int:
    if not 2 <= workers <= 16:
        raise ConfigError(f"--workers must be 2..16, got {workers}", source="demo")
    with tempfile.TemporaryDirectory(prefix="corevo-demo-") as mp:
        env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=mp)
        if not as_json:
            print(f"corevo-obs demo: {workers} workers, metrics in {mp}", file=sys.stderr)
            print("  running drill 1 (frozen worker)...", file=sys.stderr)
        report = {
            "workers": workers,
            "drills": {"frozen_worker": drill_frozen_worker(workers, 0.4 if short else 0.8, env)},
        }
    if as_json:
        print(json.dumps(report, indent=2))
    else:
        _print_text(report)
    return 0
