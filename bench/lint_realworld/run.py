"""Precision of ``corevo-obs lint`` on whole public asyncio projects that corevo-obs does
not ship, against findings judged by reading the code (``findings.tsv``).

Each project is a pinned release from PyPI: its source distribution, or its wheel when
the sdist's metadata cannot be built here (pure-Python wheels carry the same modules).
The archive is downloaded into ``downloads/`` when missing (git-ignored, never
committed), unpacked, and linted whole as a user would (``corevo-obs lint .`` from the
project's root, default configuration, no cache). Every finding is matched to its label
by (project, file:line, code):

- ``true``: the call blocks the event loop on a path that runs;
- ``false``: it does not (the reason column says why).

Precision = true / (true + false) over the findings of this run, of every confidence and
of the default output (at least ``medium``). A labelled ``true``
finding the lint no longer reports is a recall loss, printed; an unlabelled finding is
printed too and fails ``--check`` (label it: ``--append-unlabelled`` adds it with verdict
``?``).

    python bench/lint_realworld/run.py                 # download, lint, score
    python bench/lint_realworld/run.py --check         # exit 1 below 0.95 or if unlabelled
    python bench/lint_realworld/run.py --append-unlabelled
    python bench/lint_realworld/run.py --set heldout   # the held-out projects (heldout.tsv)
    python bench/lint_realworld/run.py --set clients   # held-out users of sync clients

Two sets: ``tuned`` (the projects the lint was developed against, ``findings.tsv``) and
``heldout`` (projects chosen without looking at their findings, linted once at the end of
a piece of work and labelled then, ``heldout.tsv``; never tuned on). Precision is printed
with its 95 % Wilson interval, overall and per confidence (docs/lint.md). A whole run
also writes ``<set>.run.tsv`` (each finding with its confidence), from which
``bench/lint_precision.py`` computes the per-rule and per-confidence tables of the docs.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench/, for stats
from stats import wilson  # noqa: E402 - bench/stats.py, one definition

HERE = Path(__file__).resolve().parent
DOWNLOADS = HERE / "downloads"
LABELS = HERE / "findings.tsv"
TARGET = 0.95
CONFIDENCES = ("high", "medium", "low")
PROJECTS: tuple[tuple[str, str], ...] = (
    ("aiohttp", "3.14.5"),
    ("aiogram", "3.31.0"),
    ("discord.py", "2.7.1"),
    ("hikari", "2.7.0"),
    ("telethon", "1.45.0"),
    ("aiokafka", "0.14.0"),
    ("uvicorn", "0.55.0"),
    ("sanic", "25.12.1"),
    ("asyncpg", "0.32.0"),
    ("quart", "0.22.0"),
)
# projects picked for being asyncio libraries outside the tuned set, before any was linted
HELDOUT: tuple[tuple[str, str], ...] = (
    ("hypercorn", "0.18.0"),
    ("starlette", "1.10.0"),
    ("aiodocker", "0.27.0"),
    ("aiosqlite", "0.22.1"),
    ("tortoise-orm", "1.1.9"),
    ("aiormq", "7.2.4"),
)
# projects that use the sync client libraries the catalog learned on 2026-12-06 (SQLAlchemy
# sessions, Slack's WebClient, dnspython, smtplib) beside async code, picked before any was
# linted: the held-out precision of those entries
CLIENTS: tuple[tuple[str, str], ...] = (
    ("sqladmin", "0.32.0"),
    ("slack-bolt", "1.30.0"),
    ("sqlmodel", "0.0.50"),
    ("dnspython", "2.9.2"),
    ("aiosmtpd", "1.4.6"),
)
SETS = {"tuned": (PROJECTS, LABELS), "heldout": (HELDOUT, HERE / "heldout.tsv"),
        "clients": (CLIENTS, HERE / "clients.tsv")}
# what the last whole run of a set reported, with each finding's confidence: the
# per-rule / per-confidence tables of docs/lint.md are computed from it and the labels
# (bench/lint_precision.py), so they are regenerated, not typed
RUNS = {"tuned": HERE / "tuned.run.tsv", "heldout": HERE / "heldout.run.tsv",
        "clients": HERE / "clients.run.tsv"}
RUN_COLUMNS = ("project", "version", "location", "code", "confidence")
# the checkout's own lint, whatever the directory it runs in (not an installed copy)
OWN = {**os.environ, "PYTHONPATH": os.pathsep.join(
    p for p in (str(HERE.parent.parent), os.environ.get("PYTHONPATH", "")) if p)}
COLUMNS = ("project", "version", "location", "code", "verdict", "reason")
Key = tuple[str, str, str]  # project, file:line, code


@dataclass(frozen=True)
class Label:
    project: str
    version: str
    location: str
    code: str
    verdict: str
    reason: str


def _stem(name: str) -> str:
    return name.lower().replace("-", "_").replace(".", "_")


def archive(name: str, version: str) -> Path | None:
    """The downloaded sdist or wheel of ``name==version``, if present."""
    stem = _stem(f"{name}-{version}")
    for path in sorted(DOWNLOADS.glob("*")):
        rest = _stem(path.name).removeprefix(stem)
        # the version ends there: 0.1.5.5 is not 0.1.5.50's prefix
        if (rest != _stem(path.name) and rest.startswith("_") and not rest[1:2].isdigit()
                and path.suffix in (".gz", ".zip", ".whl")):
            return path
    return None


def download(name: str, version: str) -> Path:
    """``pip download`` the sdist, else the wheel (whose modules are the same source)."""
    found = archive(name, version)
    if found is not None:
        return found
    DOWNLOADS.mkdir(exist_ok=True)
    # lint input only: a release that needs a newer Python than this one is still fetched
    base = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--ignore-requires-python",
            "-d", str(DOWNLOADS), f"{name}=={version}"]
    # the sdist itself; its build requirements (Cython...) may come as wheels
    for extra in (["--no-binary", name], ["--only-binary", ":all:"]):
        proc = subprocess.run([*base, *extra], capture_output=True, text=True, timeout=600)
        found = archive(name, version)
        if proc.returncode == 0 and found is not None:
            return found
    raise SystemExit(f"cannot download {name}=={version}: {proc.stderr.strip()[-500:]}")


def unpack(path: Path) -> Path:
    """The archive unpacked once under downloads/src/ (members outside it are refused)."""
    dest = DOWNLOADS / "src" / path.name
    if dest.is_dir():
        return dest
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if path.suffix == ".gz":
        with tarfile.open(path) as tar:
            tar.extractall(tmp, filter="data")
    else:
        with zipfile.ZipFile(path) as zf:
            root = tmp.resolve()
            for member in zf.namelist():
                if not (tmp / member).resolve().is_relative_to(root):
                    raise SystemExit(f"{path.name}: member outside the archive: {member}")
            zf.extractall(tmp)
    tmp.rename(dest)
    return dest


def project_root(unpacked: Path) -> Path:
    """An sdist holds one top folder (name-version/); a wheel is the root itself."""
    entries = [p for p in unpacked.iterdir() if not p.name.startswith(".")]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else unpacked


def lint(root: Path, extra: Sequence[str] = ()) -> list[tuple[str, str, str, str]]:
    """(file:line, code, message, confidence) of ``corevo-obs lint .`` in ``root``, every
    confidence (the default output is the ``medium`` and ``high`` ones); ``extra``: more
    options (``--installed DIR``)."""
    proc = subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "lint", ".",
                           "--format", "json", "--no-cache", "--min-confidence", "low",
                           *extra],
                          cwd=root, capture_output=True, text=True, timeout=900, env=OWN)
    if proc.returncode not in (0, 1, 2) or "Traceback" in proc.stderr:
        raise SystemExit(f"lint failed in {root} ({proc.returncode}): {proc.stderr[-2000:]}")
    out = []
    for item in json.loads(proc.stdout or "[]"):
        out.append((f"{item['path']}:{item['line']}", item["code"], item["message"],
                    item.get("confidence", "high")))
    return out


def load_labels(path: Path = LABELS) -> dict[Key, Label]:
    labels: dict[Key, Label] = {}
    if path.is_file():
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh, delimiter="\t"):
                label = Label(**{c: row[c] for c in COLUMNS})
                labels[label.project, label.location, label.code] = label
    return labels


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true",
                    help=f"exit 1 when precision < {TARGET} or a finding is unlabelled")
    ap.add_argument("--append-unlabelled", action="store_true",
                    help="add unlabelled findings to findings.tsv with verdict '?'")
    ap.add_argument("--projects", help="comma list of project names (default: all)")
    ap.add_argument("--show", action="store_true", help="print every finding with its label")
    ap.add_argument("--set", choices=sorted(SETS), default="tuned", dest="which",
                    help="tuned (findings.tsv, default), heldout (heldout.tsv) or clients "
                         "(clients.tsv)")
    args = ap.parse_args()
    wanted = set(args.projects.split(",")) if args.projects else None
    projects, labels_file = SETS[args.which]
    labels = load_labels(labels_file)
    true = false = 0
    graded = {c: [0, 0] for c in CONFIDENCES}  # confidence -> [true, false]
    unlabelled: list[Label] = []
    lost: list[Label] = []
    record: list[tuple[str, str, str, str, str]] = []
    print(f"{'project':12s} {'version':9s} {'files':>6s} {'findings':>8s} {'true':>5s} "
          f"{'false':>5s} {'?':>3s}")
    for name, version in projects:
        if wanted and name not in wanted:
            continue
        root = project_root(unpack(download(name, version)))
        files = sum(1 for _ in root.rglob("*.py"))
        found = lint(root)
        seen: set[Key] = set()
        counts = {"true": 0, "false": 0, "?": 0}
        for location, code, msg, confidence in found:
            record.append((name, version, location, code, confidence))
            key = (name, location, code)
            seen.add(key)
            label = labels.get(key)
            verdict = label.verdict if label is not None and label.version == version else "?"
            if verdict not in ("true", "false"):
                verdict = "?"
                unlabelled.append(Label(name, version, location, code, "?", msg))
            counts[verdict] += 1
            if verdict in ("true", "false"):
                graded.setdefault(confidence, [0, 0])[verdict == "false"] += 1
            if args.show:
                print(f"    {verdict:5s} {location} {code} {msg}")
        lost += [lb for k, lb in labels.items()
                 if k[0] == name and lb.verdict == "true" and k not in seen]
        true += counts["true"]
        false += counts["false"]
        print(f"{name:12s} {version:9s} {files:6d} {len(found):8d} {counts['true']:5d} "
              f"{counts['false']:5d} {counts['?']:3d}", flush=True)
    if not wanted:  # a whole run: the record the docs' tables are computed from
        with RUNS[args.which].open("w", newline="") as fh:
            writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
            writer.writerow(RUN_COLUMNS)
            writer.writerows(sorted(record))
    judged = true + false
    precision = true / judged if judged else 1.0
    low, high = wilson(true, judged)
    print(f"precision {precision:.3f} ({true} true / {judged} judged findings, 95 % "
          f"{low:.2f}-{high:.2f}); {len(unlabelled)} unlabelled; {len(lost)} true findings "
          "no longer reported")
    at_least = [0, 0]
    for c in CONFIDENCES:  # strongest first: "at least medium" includes high
        t, f = graded.get(c, [0, 0])
        at_least = [at_least[0] + t, at_least[1] + f]
        lo, hi = wilson(at_least[0], sum(at_least))
        share = at_least[0] / sum(at_least) if sum(at_least) else 1.0
        print(f"    {c:6s}: {t} true / {t + f}; at least {c}: {share:.3f} "
              f"({at_least[0]}/{sum(at_least)}, 95 % {lo:.2f}-{hi:.2f})")
    for lb in lost:
        print(f"    lost: {lb.project} {lb.location} {lb.code}: {lb.reason}")
    for lb in unlabelled:
        print(f"    unlabelled: {lb.project} {lb.location} {lb.code}: {lb.reason}")
    if args.append_unlabelled and unlabelled:
        new = not labels_file.is_file()
        with labels_file.open("a", newline="") as fh:
            writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
            if new:
                writer.writerow(COLUMNS)
            for lb in unlabelled:
                writer.writerow([lb.project, lb.version, lb.location, lb.code, "?", lb.reason])
    if args.check and (precision < TARGET or unlabelled):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
