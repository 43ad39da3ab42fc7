"""Wall time of ``corevo-obs lint`` vs ``flake8 --select ASYNC`` (flake8-async) and
``ruff check --select ASYNC`` on the same files (issue 5 target: >= 3x faster than flake8),
and with ``--corpus`` their recall and precision on the labelled corpus.

The files are the installed site-packages tree (or an evenly strided sample of it, since
flake8 needs many minutes for the whole tree). Each tool runs as a whole process, as a
user runs it; the three are interleaved with a rotating order, and the medians of the
per-round ratios are printed, plus each tool's finding count.

    python bench/lint_bench.py [--files 2000] [--rounds 3] [--jobs N] [--tree DIR]
    python bench/lint_bench.py --files 0 --tools corevo-obs,ruff --rounds 7   # whole tree
    python bench/lint_bench.py --corpus          # recall / precision on tests/lint_corpus

The corpus labels every line that blocks the loop with ``# error: CODE`` (its config is
``tests/lint_corpus/pyproject.toml``). A tool's hit is a labelled line it reports with a
blocking-call code (COB1xx; ASYNC2xx for the peers, whose other ASYNC rules are about
timeouts and checkpoints); a report on any other line is a false positive. Files about
``noqa`` are left out: each tool has its own suppression syntax.

flake8-async 26 walks a libcst tree per file, so it needs about a second per file here:
the whole tree (~13,000 files) takes hours, hence the sample default.
"""

from __future__ import annotations

import argparse
import os
import re
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


CORPUS = Path(__file__).resolve().parent.parent / "tests" / "lint_corpus"
_LABEL = re.compile(r"#\s*error:\s*COB\d{3}")
_REPORT = re.compile(r"^(?:\./)?(?P<path>[^:\s]+\.py):(?P<line>\d+):\d+: (?P<code>[A-Z]+\d+)\b")
_BLOCKING_CODE = re.compile(r"^(COB1\d\d|ASYNC2\d\d)$")
Line = tuple[str, int]


def blocking_lines(output: str) -> set[Line]:
    """The lines a tool's text output reports with a blocking-call code."""
    found = set()
    for line in output.splitlines():
        m = _REPORT.match(line.strip())
        if m and _BLOCKING_CODE.match(m["code"]):
            found.add((Path(m["path"]).as_posix(), int(m["line"])))
    return found


def run(cmd: list[str], files_arg: list[str], cwd: str | Path) -> tuple[float, set[Line]]:
    start = time.perf_counter()
    proc = subprocess.run([*cmd, *files_arg], cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1, 2) or "Traceback" in proc.stderr:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, blocking_lines(proc.stdout)


def corpus_labels(corpus: Path = CORPUS) -> tuple[set[Line], set[str]]:
    """The labelled blocking lines, and the files scored (noqa files left out)."""
    files = {p.relative_to(corpus).as_posix() for p in corpus.rglob("*.py")
             if "noqa" not in p.name}
    labels = {(rel, n) for rel in files
              for n, text in enumerate((corpus / rel).read_text().splitlines(), 1)
              if _LABEL.search(text)}
    return labels, files


def corpus_scores(tools: list[str] | None = None) -> dict[str, dict[str, object]]:
    """Per tool: hits, false positives (lines), misses (lines), precision, recall."""
    labels, files = corpus_labels()
    cmds = commands(1)
    cmds["corevo-obs"] = [*cmds["corevo-obs"], "--config", str(CORPUS / "pyproject.toml")]
    scores: dict[str, dict[str, object]] = {}
    for name in tools or list(cmds):
        got = {ln for ln in run(cmds[name], ["."], CORPUS)[1] if ln[0] in files}
        hits = got & labels
        scores[name] = {
            "hits": len(hits), "false_positives": sorted(got - labels),
            "misses": sorted(labels - got), "labelled": len(labels),
            "precision": len(hits) / len(got) if got else 1.0,
            "recall": len(hits) / len(labels) if labels else 1.0,
        }
    return scores


def print_corpus_scores() -> None:
    scores = corpus_scores()
    labelled = next(iter(scores.values()))["labelled"]
    print(f"labelled corpus {CORPUS}: {labelled} blocking lines")
    for name, s in scores.items():
        print(f"{name:13s} recall {s['recall']:.2f} ({s['hits']}/{labelled})   "
              f"precision {s['precision']:.2f}   "
              f"false positives {len(s['false_positives'])}   "  # type: ignore[arg-type]
              f"misses {len(s['misses'])}")  # type: ignore[arg-type]
        for path, line in s["false_positives"]:  # type: ignore[attr-defined]
            print(f"    false positive {path}:{line}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, default=Path(site.getsitepackages()[0]))
    ap.add_argument("--files", type=int, default=2000, help="sample size; 0 = every file")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--tools", default="corevo-obs,flake8-async,ruff",
                    help="comma list; corevo-obs is always run (it is the baseline)")
    ap.add_argument("--corpus", action="store_true",
                    help="recall and precision on the labelled corpus instead of timing")
    args = ap.parse_args()
    if args.corpus:
        print_corpus_scores()
        return

    files = python_files(args.tree, args.files or None)
    size = sum(os.path.getsize(f) for f in files) / 1e6
    print(f"{len(files)} files, {size:.0f} MB under {args.tree}; {args.jobs} jobs, "
          f"{os.cpu_count()} CPUs, {args.rounds} rounds")
    wanted = {"corevo-obs", *args.tools.split(",")}
    cmds = {n: c for n, c in commands(args.jobs).items() if n in wanted}
    names = list(cmds)
    walls: dict[str, list[float]] = {n: [] for n in names}
    found: dict[str, set[Line]] = {}
    with tempfile.TemporaryDirectory() as cwd:  # no project config is picked up
        for r in range(args.rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            for name in order:
                wall, found[name] = run(cmds[name], files, cwd)
                walls[name].append(wall)
            print(f"round {r + 1}: " + ", ".join(f"{n} {walls[n][-1]:.1f}s" for n in names),
                  flush=True)
    ours = walls["corevo-obs"]
    for name in names:
        print(f"{name:13s} median {statistics.median(walls[name]):7.2f} s   "
              f"blocking-call lines reported {len(found[name])}")
    for peer in names[1:]:
        shared = found[peer] & found["corevo-obs"]
        print(f"of {peer}'s {len(found[peer])} lines corevo-obs reports {len(shared)}, "
              f"and {len(found['corevo-obs'] - found[peer])} more")
        for path, line in sorted(found[peer] - found["corevo-obs"]):
            print(f"    only {peer}: {path}:{line}")
    for peer in names[1:]:
        ratios = [p / o for p, o in zip(walls[peer], ours, strict=True)]
        print(f"{peer} / corevo-obs wall time: {statistics.median(ratios):.2f}x "
              f"(>1 means corevo-obs is faster)")


if __name__ == "__main__":
    main()
