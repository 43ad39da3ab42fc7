"""Wall time of ``corevo-obs lint`` vs ``flake8 --select ASYNC`` (flake8-async) and
``ruff check --select ASYNC`` on the same files (issue 5 target: >= 3x faster than flake8).

The files are the installed site-packages tree (or an evenly strided sample of it, since
flake8 needs many minutes for the whole tree). Each tool runs as a whole process, as a
user runs it; the three are interleaved with a rotating order, and the medians of the
per-round ratios are printed, plus each tool's finding count.

    python bench/lint_bench.py [--files 2000] [--rounds 3] [--jobs N] [--tree DIR]
    python bench/lint_bench.py --files 0 --tools corevo-obs,ruff --rounds 7   # whole tree

flake8-async 26 walks a libcst tree per file, so it needs about a second per file here:
the whole tree (~13,000 files) takes hours, hence the sample default.
"""

from __future__ import annotations

import argparse
import os
import shutil
import site
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def python_files(tree: Path, limit: int | None) -> list[str]:
    files = sorted(
        os.path.join(d, f) for d, _, names in os.walk(tree) for f in names if f.endswith(".py")
    )
    if limit and limit < len(files):
        step = len(files) / limit
        files = [files[int(i * step)] for i in range(limit)]
    return files


def commands(jobs: int) -> dict[str, list[str]]:
    return {
        "corevo-obs": [sys.executable, "-m", "corevo_obs.cli.main", "lint",
                       "--jobs", str(jobs)],
        "flake8-async": [sys.executable, "-m", "flake8", "--isolated", "--select", "ASYNC",
                         "--exit-zero", "--jobs", str(jobs)],
        "ruff": [shutil.which("ruff") or "ruff", "check", "--isolated", "--select", "ASYNC",
                 "--no-cache", "--exit-zero", "--output-format", "concise", "--quiet"],
    }


def run(cmd: list[str], files_arg: list[str], cwd: str) -> tuple[float, int]:
    start = time.perf_counter()
    proc = subprocess.run([*cmd, *files_arg], cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1, 2) or "Traceback" in proc.stderr:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, sum(1 for line in proc.stdout.splitlines() if line.strip())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=Path(site.getsitepackages()[0]))
    ap.add_argument("--files", type=int, default=2000, help="sample size; 0 = every file")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--tools", default="corevo-obs,flake8-async,ruff",
                    help="comma list; corevo-obs is always run (it is the baseline)")
    args = ap.parse_args()

    files = python_files(args.tree, args.files or None)
    size = sum(os.path.getsize(f) for f in files) / 1e6
    print(f"{len(files)} files, {size:.0f} MB under {args.tree}; {args.jobs} jobs, "
          f"{os.cpu_count()} CPUs, {args.rounds} rounds")
    wanted = {"corevo-obs", *args.tools.split(",")}
    cmds = {n: c for n, c in commands(args.jobs).items() if n in wanted}
    names = list(cmds)
    walls: dict[str, list[float]] = {n: [] for n in names}
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as cwd:  # no project config is picked up
        for r in range(args.rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            for name in order:
                wall, n = run(cmds[name], files, cwd)
                walls[name].append(wall)
                counts[name] = n
            print(f"round {r + 1}: " + ", ".join(f"{n} {walls[n][-1]:.1f}s" for n in names),
                  flush=True)
    ours = walls["corevo-obs"]
    for name in names:
        print(f"{name:13s} median {statistics.median(walls[name]):7.2f} s   "
              f"output lines {counts[name]}")
    for peer in names[1:]:
        ratios = [p / o for p, o in zip(walls[peer], ours, strict=True)]
        print(f"{peer} / corevo-obs wall time: {statistics.median(ratios):.2f}x "
              f"(>1 means corevo-obs is faster)")


if __name__ == "__main__":
    main()
