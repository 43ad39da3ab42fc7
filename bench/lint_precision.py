"""Precision of ``corevo-obs lint`` per rule and per confidence, with 95 % Wilson
intervals, on the real-project sets of ``bench/lint_realworld``: computed from the labels
(``findings.tsv``, ``heldout.tsv``: each finding judged by reading the code) joined with the
last whole run of each set (``tuned.run.tsv``, ``heldout.run.tsv``: what that run
reported, with each finding's confidence). A finding of the run without a label is
counted apart (``unlabelled``), never as true or false.

The tables between the ``precision-tables`` markers of docs/lint.md are this script's
output (``tests/test_lint_precision.py`` keeps them equal):

    python bench/lint_precision.py            # print the tables
    python bench/lint_precision.py --write    # rewrite them in docs/lint.md
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from pathlib import Path

from stats import wilson  # bench/stats.py, beside this script

HERE = Path(__file__).resolve().parent
REALWORLD = HERE / "lint_realworld"
DOCS = HERE.parent / "docs" / "lint.md"
START, END = "<!-- precision-tables:start -->", "<!-- precision-tables:end -->"
# set name -> (labels, run record)
SETS = {"tuned": (REALWORLD / "findings.tsv", REALWORLD / "tuned.run.tsv"),
        "held-out": (REALWORLD / "heldout.tsv", REALWORLD / "heldout.run.tsv"),
        "clients": (REALWORLD / "clients.tsv", REALWORLD / "clients.run.tsv")}
CONFIDENCES = ("high", "medium", "low")


def _rows(path: Path) -> list[dict[str, str]]:
    if not path.is_file():
        return []
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def judged(labels: Path, run: Path) -> list[tuple[str, str, str]]:
    """(code, confidence, verdict) of every finding of the run; verdict ``?`` when the
    labels hold none for it (or one for another version)."""
    verdicts = {(r["project"], r["version"], r["location"], r["code"]): r["verdict"]
                for r in _rows(labels)}
    out = []
    for r in _rows(run):
        verdict = verdicts.get((r["project"], r["version"], r["location"], r["code"]), "?")
        out.append((r["code"], r["confidence"],
                    verdict if verdict in ("true", "false") else "?"))
    return out


def _cell(true: int, false: int) -> str:
    n = true + false
    if not n:
        return "-"
    low, high = wilson(true, n)
    return f"{true / n:.3f} ({low:.2f}-{high:.2f})"


def table(name: str, rows: list[tuple[str, str, str]]) -> list[str]:
    """Markdown lines: per confidence (and at least medium, the default output), per rule."""
    counts: Counter[tuple[str, str, str]] = Counter()
    for code, confidence, verdict in rows:
        counts[code, confidence, verdict] += 1

    def tally(codes: set[str] | None, confs: tuple[str, ...]) -> tuple[int, int, int]:
        got = [sum(n for (c, f, v), n in counts.items()
                   if v == want and f in confs and (codes is None or c in codes))
               for want in ("true", "false", "?")]
        return got[0], got[1], got[2]

    out = [f"*{name}* ({len(rows)} findings in the last whole run)", "",
           "| confidence | true | false | unlabelled | precision (95 %) |",
           "|---|---|---|---|---|"]
    levels: list[tuple[str, tuple[str, ...]]] = [(c, (c,)) for c in CONFIDENCES]
    levels.insert(2, ("at least medium (default output)", ("high", "medium")))
    levels.append(("all", CONFIDENCES))
    for label, confs in levels:
        t, f, u = tally(None, confs)
        out.append(f"| {label} | {t} | {f} | {u} | {_cell(t, f)} |")
    out += ["", "| rule | confidence | true | false | unlabelled | precision (95 %) |",
            "|---|---|---|---|---|---|"]
    for code in sorted({c for c, _, _ in rows}):
        levels_seen = {f for c, f, _ in rows if c == code}
        shown = [c for c in CONFIDENCES if c in levels_seen]
        for conf in [*shown, *(["all"] if len(shown) > 1 else [])]:
            t, f, u = tally({code}, CONFIDENCES if conf == "all" else (conf,))
            out.append(f"| {code} | {conf} | {t} | {f} | {u} | {_cell(t, f)} |")
    return out


def render() -> str:
    """The tables of every set, as they stand between the markers of docs/lint.md."""
    lines: list[str] = []
    for name, (labels, run) in SETS.items():
        if lines:
            lines.append("")
        if not run.is_file():
            lines.append(f"*{name}*: no whole run recorded ({run.name})")
            continue
        lines += table(name, judged(labels, run))
    return "\n".join(lines) + "\n"


def replace_block(text: str, block: str) -> str:
    head, start, rest = text.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"{DOCS}: no {START} ... {END} block")
    return f"{head}{START}\n{block}{END}{tail}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the tables in docs/lint.md")
    args = ap.parse_args()
    block = render()
    if args.write:
        DOCS.write_text(replace_block(DOCS.read_text(encoding="utf-8"), block),
                        encoding="utf-8")
    else:
        sys.stdout.write(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
