"""Processes of loss-aware lease holders (lease_fault_holder.py) for the lease fault tests.

The Redis, SQLite, Sentinel and persistence storms start their holders, stop them and
read their stats the same way; only the quota, the timings and the server differ. Each
process ``i`` runs as worker ``h<i>`` and writes its grant → end-of-work lines to
``tmp/track<i>`` (the independent tracker, lease_tracker.py, reads them back).
"""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import helper_cmd


def start_holders(env: dict[str, str], tmp: Path, procs: int, *,
                  seed: Callable[[int], int] = lambda i: i,
                  skew: Callable[[int], float] = lambda i: 0.0,
                  **cfg: Any) -> tuple[list[subprocess.Popen[str]], list[Path]]:
    """``procs`` holder processes on ``cfg`` (lease_fault_holder.py's keys but the
    per-process ones), each ready (its store built) when this returns; their tracks."""
    started: list[subprocess.Popen[str]] = []
    tracks: list[Path] = []
    for i in range(procs):
        tracks.append(tmp / f"track{i}")
        mine = {**cfg, "worker": f"h{i}", "track": str(tracks[-1]), "seed": seed(i),
                "skew": skew(i)}
        started.append(subprocess.Popen(helper_cmd("lease_fault_holder.py", json.dumps(mine)),
                                        env=env, stdout=subprocess.PIPE, text=True))
    for p in started:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return started, tracks


def finish_holders(procs: list[subprocess.Popen[str]], timeout: float = 60
                   ) -> dict[str, int]:
    """Wait for the holders' clean exit; their summed stats (holds, losses by reason)."""
    stats: dict[str, int] = {}
    for p in procs:
        out, _ = p.communicate(timeout=timeout)
        assert p.returncode == 0, out
        for k, v in json.loads(out.strip().splitlines()[-1]).items():
            stats[k] = stats.get(k, 0) + v
    return stats


def stop_holders(procs: list[subprocess.Popen[str]], timeout: float = 60) -> dict[str, int]:
    """SIGUSR1 (finish the current holds, then exit), then ``finish_holders``."""
    for p in procs:
        p.send_signal(signal.SIGUSR1)
    return finish_holders(procs, timeout)


def kill_left(procs: list[subprocess.Popen[Any]]) -> None:
    """SIGKILL whatever is still running (a test's ``finally``)."""
    for p in procs:
        if p.poll() is None:
            p.kill()
