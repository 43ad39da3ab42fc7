"""Recall and false findings of ``corevo-obs lint`` on flake8-async's own ASYNC2xx eval
files, as they ship in its source distribution (the peer's published labels, not files
re-written from its docs).

The sdist is downloaded with ``pip download --no-deps --no-binary :all:`` into the
git-ignored ``bench/lint_realworld/downloads/``. Scored files: every ``async2*.py`` of
``tests/eval_files`` that runs under asyncio: where a rule has a trio file and an
``_asyncio`` twin (``# NOASYNCIO # see async23x_asyncio.py``), the twin; ``async200.py`` is
left out (its calls are whatever ``--async200-blocking-calls`` names on its ARG line).
A label is a ``# ASYNC2xx: col, ...`` comment (``# ASYNC2xx_asyncio: ...`` in a twin).
flake8-async matches names as text and its eval files call ``subprocess.run()`` or
``httpx.Client()`` without importing them; this lint resolves imports, so each file is
linted as a copy whose first line (a comment) becomes the missing ``import`` line of the
standard and HTTP modules it names (line numbers unchanged).
A labelled line counts as found when the lint reports any blocking-call code on it (COB1xx;
``meets`` says whether the code is the one that lists that ASYNC code as its peer); any
report on an unlabelled line is a false finding.

    python bench/lint_flake8_async_eval.py [--version 26.8.1]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

from stats import wilson  # bench/stats.py, beside this script

HERE = Path(__file__).resolve().parent
DOWNLOADS = HERE / "lint_realworld" / "downloads"
LABEL = re.compile(r"#\s*(ASYNC2\d\d)(?:_asyncio)?\s*:")
SKIP = frozenset({"async200.py"})
# the checkout's own lint, whatever the directory it runs in (not an installed copy)
OWN = {**os.environ, "PYTHONPATH": os.pathsep.join(
    p for p in (str(HERE.parent), os.environ.get("PYTHONPATH", "")) if p)}
MODULES = ("os", "subprocess", "httpx", "httpx2", "urllib3", "requests", "time", "io",
           "pathlib", "socket", "urllib")
# reports on lines the peer's files do not label, judged once by reading (file, line): a
# true one blocks the loop (the file tests another rule, or marks it "should error")
JUDGED: dict[tuple[str, int], tuple[bool, str]] = {
    **{("async211.py", n): (True, "foo = PoolManager(): every request() blocks, verb or not")
       for n in (19, 20, 22, 23, 24, 25, 26)},
    ("async212.py", 98): (True, "client: Client = Client(); labelled 'not implemented'"),
    ("async232_asyncio.py", 71): (True, "f: None | TextIOWrapper | None; 'not handled'"),
    **{("async232_asyncio.py", n): (True, "open() in async def (ASYNC230 is off in this file)")
       for n in (107, 112, 117, 122, 126, 131, 212, 219)},
    **{("async232_asyncio.py", n): (True, "labelled 'should error' (not handled by the peer)")
       for n in (248, 256, 264, 265)},
    ("async23x_asyncio.py", 18): (False, "await open(''): the peer's convention that an "
                                         "awaited call is an async namesake"),
}

# labelled lines where the peer's rule and this lint's semantics differ by design
# (docs/lint.md, "flake8-async's eval files"): recall is printed over all labelled lines
# and over the others
DIFFERENT: dict[tuple[str, int], str] = {
    **{("async210.py", n): "a name the file never binds (NameError when it runs)"
       for n in (50, 51)},
    ("async212.py", 49): "the module rebinds the global later (glob_client: int = 4): when "
                         "the coroutine runs, it is an int",
    **{("async240.py", n): "pure path arithmetic (normpath, relpath, _path_normpath): no "
                           "file-system call; ASYNC240 is a 'use trio.Path' style rule"
       for n in (8, 9, 12, 13, 28)},
    ("async240.py", 27): "os.path.sameopenfile(0, 1): fstat of open descriptors, no path",
    ("async240.py", 30): "await os.path.isfile(''): an awaited call is an async namesake "
                         "(the peer's own ASYNC230 convention, applied to every call)",
}


def with_imports(text: str) -> str:
    """The file with the modules it names but never imports imported on its first line."""
    lines = text.splitlines()
    missing = [m for m in MODULES if re.search(rf"(?<![\w.]){m}\.", text)
               and not re.search(rf"^\s*import {m}\b", text, re.M)]
    if missing and lines and lines[0].lstrip().startswith("#"):
        lines[0] = f"import {', '.join(missing)}  {lines[0].strip()}"
    return "\n".join(lines) + "\n"


def eval_files(version: str) -> Path:
    """The unpacked ``tests/eval_files`` of flake8-async ``version``."""
    DOWNLOADS.mkdir(parents=True, exist_ok=True)
    sdist = DOWNLOADS / f"flake8_async-{version}.tar.gz"
    if not sdist.is_file():
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                        "--no-binary", ":all:", "-d", str(DOWNLOADS),
                        f"flake8-async=={version}"], check=True, timeout=600)
    dest = DOWNLOADS / "src" / sdist.name
    if not dest.is_dir():
        dest.mkdir(parents=True)
        with tarfile.open(sdist) as tar:
            tar.extractall(dest, filter="data")
    return dest / f"flake8_async-{version}" / "tests" / "eval_files"


def chosen(folder: Path) -> list[Path]:
    """The asyncio-relevant ASYNC2xx files (a rule's ``_asyncio`` twin over its trio file)."""
    out = []
    for path in sorted(folder.glob("async2*.py")):
        head = path.read_text().splitlines()[:6]
        twin = path.with_name(path.stem + "_asyncio.py")
        if path.name in SKIP or (any("NOASYNCIO" in h for h in head) and twin.is_file()):
            continue
        out.append(path)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--version", default="26.8.1")
    args = ap.parse_args()
    folder = eval_files(args.version)
    originals = chosen(folder)
    work = DOWNLOADS / "src" / f"flake8_async-{args.version}-imported"
    work.mkdir(exist_ok=True)
    files = []
    for path in originals:
        (work / path.name).write_text(with_imports(path.read_text()))
        files.append(work / path.name)
    peers = json.loads(subprocess.run(
        [sys.executable, "-c", "import json; from corevo_obs.tooling.lint.rules import RULES;"
         "print(json.dumps({p: c for c, r in RULES.items() for p in r.peers}))"],
        capture_output=True, text=True, check=True, env=OWN).stdout)
    proc = subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "lint",
                           *map(str, files), "--format", "json", "--no-cache"],
                          cwd=work, capture_output=True, text=True, timeout=600, env=OWN)
    got: dict[tuple[str, int], set[str]] = {}
    for row in json.loads(proc.stdout or "[]"):
        if row["code"].startswith("COB1"):
            got.setdefault((Path(row["path"]).name, row["line"]), set()).add(row["code"])
    found = meets = labelled = false = judged_true = 0
    print(f"flake8-async {args.version} eval files ({len(files)}): "
          + ", ".join(p.name for p in files))
    for path in originals:
        want = {n: m.group(1) for n, text in enumerate(path.read_text().splitlines(), 1)
                if (m := LABEL.search(text))}
        hits = [n for n in want if (path.name, n) in got]
        same = [n for n in hits if peers.get(want[n]) in got[path.name, n]]
        extra = sorted(n for (name, n) in got if name == path.name and n not in want
                       and not JUDGED.get((name, n), (False, ""))[0])
        judged_true += sum(1 for (name, n) in got if name == path.name and n not in want
                           and JUDGED.get((name, n), (False, ""))[0])
        labelled += len(want)
        found += len(hits)
        meets += len(same)
        false += len(extra)
        print(f"  {path.name:28s} labelled {len(want):3d} found {len(hits):3d} "
              f"false {len(extra)}")
        for n in sorted(set(want) - set(hits)):
            print(f"      missed {path.name}:{n} {want[n]}")
        for n in extra:
            why = JUDGED.get((path.name, n), (False, "not judged yet"))[1]
            print(f"      false  {path.name}:{n} {sorted(got[path.name, n])}: {why}")
    low, high = wilson(found, labelled)
    print(f"recall {found / labelled:.3f} ({found}/{labelled}, 95 % {low:.2f}-{high:.2f}); "
          f"with the code that lists the ASYNC code as peer {meets}/{labelled}; "
          f"reports on unlabelled lines: {judged_true} true by reading, {false} false")
    agreed = labelled - len(DIFFERENT)
    agreed_found = found - sum(1 for k in DIFFERENT if k in got)
    low, high = wilson(agreed_found, agreed)
    print(f"recall where the semantics agree {agreed_found / agreed:.3f} ({agreed_found}/"
          f"{agreed}, 95 % {low:.2f}-{high:.2f}); {len(DIFFERENT)} lines differ by design:")
    for (name, n), why in sorted(DIFFERENT.items()):
        print(f"      {'found' if (name, n) in got else 'differ'} {name}:{n}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
