"""Recall of blocking-call lints on real bugs that public asyncio projects later fixed
(held out): ``lint_realworld/fixed_bugs.tsv``.

The bugs were picked from evidence of a fix (a changelog line, a fix pull request, or the
release diff that moved the call off the loop) and committed before any lint ran on them.
Each row names the last release before the fix, the file, the lines where the blocking
call ran on the event loop, the function holding those lines (``Class.method`` or
``function``), the call, how an ``async def`` reaches it, the fix and the source.

Each pre-fix release is downloaded and unpacked with ``lint_realworld/run.py``'s helpers
(sdist, else the wheel; into the git-ignored ``lint_realworld/downloads/``) and linted
whole, from the project's root, by:

- corevo-obs (this checkout, no cache), one run at ``--min-confidence low``; its default
  output is the findings of at least ``medium`` confidence, so "default" below is that run
  filtered to ``high`` and ``medium`` (the same findings a default run prints);
- ruff's ASYNC rules (``ruff check --isolated --select ASYNC --no-cache``), whole project;
- flake8-async (``flake8 --isolated --select ASYNC``) on the files holding the bugs only,
  not the whole project (it takes about a second per file). It reports nothing across
  files, so linting the bug's file alone loses none of its findings for that bug.

Matching rule (fixed before scoring; a bug is found by a tool when at least one finding
matches it):

1. line: a finding whose code is a blocking-call code (corevo-obs ``COB1xx``, ruff and
   flake8-async ``ASYNC2xx``) at the bug's file and at one of its lines;
2. chain (corevo-obs only): a ``COB110``/``COB111`` finding anywhere in the project whose
   chain (the message after ``blocks inside async def X:``, or ``blocks on the loop in X:``
   for sync code the loop runs, split on `` -> ``) names the
   bug's function after the chain's first element (the ``async def`` of the call site):
   an element equal to the function, or ending in ``.`` + the function, ``()`` stripped.
   Such a finding's call site is an ``async def`` that reaches the bug's function.

A bug whose lines sit in an ``async def`` itself can only be found by rule 1 (its function
is the async def, which rule 2 skips as the chain's first element). Recall = found / bugs,
over every bug and per batch (each batch of the list was committed before its first
scoring run; a later run re-scores the earlier batches, which must come out unchanged),
with 95 % Wilson intervals, per tool, and for corevo-obs per confidence ("at least high",
"at least medium" = default, "all" = ``--min-confidence low``; a bug's confidence is that
of its strongest matching finding). Each miss is printed with what the tool reported in
the bug's file.

    python bench/lint_fixed_bugs.py             # download, lint, score, write the record
    python bench/lint_fixed_bugs.py --batches 3,4
                                                # score only a new batch: the record keeps
                                                # the other batches' rows as first scored
    python bench/lint_fixed_bugs.py --batches 1,2 --record /tmp/rescored.tsv
                                                # re-score old batches elsewhere (after
                                                # tuning on them: no longer held out)
    python bench/lint_fixed_bugs.py --follow-deps --record /tmp/deps.tsv
                                                # with each project's dependencies (as pip
                                                # resolves them today) installed into
                                                # downloads/deps/ and --installed there
    python bench/lint_fixed_bugs.py --write     # put the record's table into docs/lint.md
                                                # (no linting: the held-out set is scored once)

A run writes ``lint_realworld/fixed_bugs.run.tsv`` (each bug, tool, whether found, how,
the confidence and the matching or nearest findings); ``render()`` computes the docs'
table from it, and ``tests/test_lint_fixed_bugs.py`` checks that the table in
docs/lint.md is that output.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from stats import wilson  # bench/stats.py, beside this script

sys.path.insert(0, str(Path(__file__).resolve().parent / "lint_realworld"))
import run as realworld  # noqa: E402 - lint_realworld/run.py's download/unpack/lint helpers

HERE = Path(__file__).resolve().parent
BUGS = HERE / "lint_realworld" / "fixed_bugs.tsv"
RECORD = HERE / "lint_realworld" / "fixed_bugs.run.tsv"
DOCS = HERE.parent / "docs" / "lint.md"
START = "<!-- fixed-bugs-table:start -->"
END = "<!-- fixed-bugs-table:end -->"
BUG_COLUMNS = ("id", "project", "version", "fixed_version", "path", "lines", "function",
               "blocking_call", "reached_from", "fix", "source", "batch")
RECORD_COLUMNS = ("id", "tool", "found", "how", "confidence", "detail")
# the tools of the record, in the table's order
TOOLS = ("corevo-obs", "ruff", "flake8-async")
RANK = {"high": 0, "medium": 1, "low": 2}


@dataclass(frozen=True)
class Bug:
    id: str
    project: str
    version: str
    fixed_version: str
    path: str
    lines: tuple[int, ...]
    function: str
    blocking_call: str
    reached_from: str
    fix: str
    source: str
    batch: str  # "1", "2": each batch committed before its first scoring run


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    code: str
    message: str
    confidence: str


def load_bugs(path: Path = BUGS) -> list[Bug]:
    with path.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    bugs = []
    for row in rows:
        fields = {c: row[c] for c in BUG_COLUMNS}
        lines = tuple(int(n) for n in fields.pop("lines").split(","))
        bugs.append(Bug(lines=lines, **fields))
    return bugs


def _split(location: str) -> tuple[str, int]:
    path, _, line = location.rpartition(":")
    return path.replace("\\", "/").removeprefix("./"), int(line)


def install_deps(name: str, release: str) -> Path | None:
    """The project's dependencies installed into ``downloads/deps/NAME-RELEASE`` (kept
    across runs), for ``--installed``; None when pip cannot install them here."""
    target = realworld.DOWNLOADS / "deps" / f"{name}-{release}"
    if not target.is_dir():
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target",
                               str(target), f"{name}=={release}"],
                              capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            print(f"{name} {release}: dependencies not installed: "
                  f"{(proc.stderr.strip().splitlines() or ['?'])[-1]}", flush=True)
            return None
    return target


def corevo(root: Path, installed: Path | None = None) -> list[Finding]:
    out = []
    extra = ("--installed", str(installed)) if installed is not None else ()
    for location, code, message, confidence in realworld.lint(root, extra):
        path, line = _split(location)
        out.append(Finding(path, line, code, message, confidence))
    return out


def ruff(root: Path) -> list[Finding]:
    proc = subprocess.run(["ruff", "check", "--isolated", "--select", "ASYNC", "--no-cache",
                           "--exit-zero", "--output-format", "json", "."],
                          cwd=root, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"ruff failed in {root}: {proc.stderr[-2000:]}")
    out = []
    for item in json.loads(proc.stdout or "[]"):
        path = Path(item["filename"]).resolve().relative_to(root.resolve()).as_posix()
        out.append(Finding(path, int(item["location"]["row"]), item["code"] or "",
                           item["message"], ""))
    return out


def flake8_async(root: Path, files: list[str]) -> list[Finding]:
    proc = subprocess.run([sys.executable, "-m", "flake8", "--isolated", "--select", "ASYNC",
                           *files], cwd=root, capture_output=True, text=True, timeout=1800)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"flake8 failed in {root}: {proc.stderr[-2000:]}")
    out = []
    for text in proc.stdout.splitlines():
        path, line, _col, rest = text.split(":", 3)
        code, _, message = rest.strip().partition(" ")
        out.append(Finding(path.removeprefix("./"), int(line), code, message, ""))
    return out


def chain(message: str) -> list[str]:
    """The chain of a COB110 message, each element without ``()``; [] when none."""
    _, marker, rest = message.partition(" blocks inside async def ")
    if not marker:  # sync code the loop runs: "blocks on the loop in X (a protocol ...)"
        _, marker, rest = message.partition(" blocks on the loop in ")
    if not marker or ": " not in rest:
        return []
    return [name.strip().removesuffix("()") for name in rest.partition(": ")[2].split(" -> ")]


def match(bug: Bug, finding: Finding) -> str | None:
    """``line`` or ``chain`` when the finding finds the bug (the module docstring's rule)."""
    blocking = finding.code.startswith("COB1") or finding.code.startswith("ASYNC2")
    if blocking and finding.path == bug.path and finding.line in bug.lines:
        return "line"
    if finding.code in ("COB110", "COB111"):
        names = chain(finding.message)[1:]
        if any(n == bug.function or n.endswith("." + bug.function) for n in names):
            return "chain"
    return None


def score(bug: Bug, tool: str, findings: list[Finding]) -> list[str]:
    """A record row: id, tool, found, how, confidence, detail."""
    hits = [(how, f) for f in findings if (how := match(bug, f)) is not None]
    if hits:
        hits.sort(key=lambda h: (RANK.get(h[1].confidence, 0), h[0] != "line"))
        how, best = hits[0]
        detail = f"{best.path}:{best.line} {best.code} {best.message}"
        return [bug.id, tool, "1", how, best.confidence, detail]
    near = [f for f in findings if f.path == bug.path]
    detail = ("nothing reported in the file" if not near else "in the file: " + "; ".join(
        f"{f.line} {f.code}" + (f" ({f.confidence})" if f.confidence else "") for f in near))
    return [bug.id, tool, "0", "-", "", detail]


def load_record(path: Path = RECORD) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def recall_rows(record: list[dict[str, str]]) -> list[tuple[str, int, int]]:
    """(label, found, bugs) per tool, corevo-obs per confidence (at least high, default,
    all)."""
    rows: list[tuple[str, int, int]] = []
    for tool in TOOLS:
        mine = [r for r in record if r["tool"] == tool]
        if tool == "corevo-obs":
            for label, levels in (("corevo-obs, high only", ("high",)),
                                  ("corevo-obs, default (at least medium)", ("high", "medium")),
                                  ("corevo-obs, `--min-confidence low`",
                                   ("high", "medium", "low"))):
                found = sum(1 for r in mine if r["found"] == "1" and r["confidence"] in levels)
                rows.append((label, found, len(mine)))
        else:
            label = ("flake8-async (the bugs' files)" if tool == "flake8-async"
                     else "ruff ASYNC")
            rows.append((label, sum(1 for r in mine if r["found"] == "1"), len(mine)))
    return rows


def render(record: list[dict[str, str]] | None = None) -> str:
    """The docs' table, from the run record: every bug, then each batch."""
    record = load_record() if record is None else record
    batch = {b.id: b.batch for b in load_bugs()}
    parts = [("all", record)] + [
        (f"batch {n}", [r for r in record if batch[r["id"]] == n])
        for n in sorted(set(batch.values()), key=lambda b: (len(b), b))]  # 9 before 10
    head = " | ".join(label for label, _ in parts)
    lines = [f"| tool | {head} |", "|---|" + "---|" * len(parts)]
    columns = [recall_rows(rows) for _, rows in parts]
    for i, (label, _, _) in enumerate(columns[0]):
        cells = []
        for rows in columns:
            _, found, n = rows[i]
            lo, hi = wilson(found, n)
            share = found / n if n else 0.0
            cells.append(f"{found}/{n} = {share:.2f} ({lo:.2f}-{hi:.2f})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def write_docs() -> None:
    text = DOCS.read_text(encoding="utf-8")
    head, start, rest = text.partition(START)
    _, end, tail = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"{DOCS} has no {START} ... {END} block")
    DOCS.write_text(f"{head}{START}\n{render()}{END}{tail}", encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true",
                    help="put the last run's table into docs/lint.md, without linting")
    ap.add_argument("--batches", default="",
                    help="comma list of the batches to lint (default: all); the record "
                         "keeps the other batches' rows as they were scored")
    ap.add_argument("--follow-deps", action="store_true",
                    help="install each project's dependencies and follow chains into them "
                         "(corevo-obs only; write the record elsewhere with --record)")
    ap.add_argument("--record", type=Path, default=RECORD,
                    help=f"the record to write (default {RECORD.name})")
    args = ap.parse_args()
    if args.write:
        write_docs()
        return 0
    every = load_bugs()
    wanted = {b.strip() for b in args.batches.split(",") if b.strip()}
    unknown = wanted - {b.batch for b in every}
    if unknown:
        ap.error(f"no such batch: {', '.join(sorted(unknown))}")
    bugs = [b for b in every if not wanted or b.batch in wanted]
    record: list[list[str]] = []
    if wanted and args.record.exists():  # the other batches, as first scored
        scored = {b.id for b in bugs}
        record = [[r[c] for c in RECORD_COLUMNS] for r in load_record(args.record)
                  if r["id"] not in scored]
    for version in sorted({(b.project, b.version) for b in bugs}):
        name, release = version
        root = realworld.project_root(realworld.unpack(realworld.download(name, release)))
        mine = [b for b in bugs if (b.project, b.version) == version]
        deps = install_deps(name, release) if args.follow_deps else None
        found = {"corevo-obs": corevo(root, deps), "ruff": ruff(root),
                 "flake8-async": flake8_async(root, sorted({b.path for b in mine}))}
        for bug in mine:
            for tool in TOOLS:
                record.append(score(bug, tool, found[tool]))
        print(f"{name} {release}: {len(mine)} bug(s) linted", flush=True)
    order = {b.id: i for i, b in enumerate(every)}
    record.sort(key=lambda r: (order[r[0]], TOOLS.index(r[1])))
    with args.record.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
        writer.writerow(RECORD_COLUMNS)
        writer.writerows(record)
    rows = [dict(zip(RECORD_COLUMNS, r, strict=True)) for r in record]
    print(render(rows))
    for r in rows:
        if r["found"] == "0":
            print(f"miss  {r['tool']:12s} {r['id']}: {r['detail']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
