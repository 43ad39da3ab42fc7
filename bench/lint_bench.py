"""Wall time of ``corevo-obs lint`` vs ``flake8 --select ASYNC`` (flake8-async) and
``ruff check --select ASYNC`` on the same files, cold and warm (issue 5 target: >= 3x
faster than flake8; issue 17: a warm re-run of an unchanged 1,000-file tree <= 0.5 s),
and with ``--corpus`` their recall and precision on the labelled corpus.

The files are a generated tree of async service modules (``--generated N``: helpers,
guarded helpers, chains across modules, offloads, direct blocking calls), or the
installed site-packages tree or an evenly strided sample of it (``--files``), copied to a
temp dir. Each tool runs as a whole process, as a user runs it; the tools are interleaved
with a rotating order. Per round and tool: *cold* (an empty cache dir), *warm* (the same
command again, nothing changed) and *warm, one file changed* (a comment appended to one
module). flake8 has no cache, so its every run is cold: it runs once per round and that
figure stands for all three. The medians of the per-round ratios are printed, plus each
tool's finding count. Python tools run with bytecode caching on (as installed packages
have it), after one untimed warm-up run.

    python bench/lint_bench.py --generated 1000 [--rounds 3]   # the cold / warm table
    python bench/lint_bench.py [--files 2000] [--rounds 3] [--jobs N] [--tree DIR]
    python bench/lint_bench.py --files 0 --tools corevo-obs,ruff --rounds 7   # whole tree
    python bench/lint_bench.py --corpus          # recall / precision on tests/lint_corpus
    python bench/lint_bench.py --generated 1000 --tools corevo-obs --before /tmp/base
                                                 # against the base commit, same rounds
                                                 # (/tmp/base: `git archive <commit>`)

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


BEFORE = "corevo-obs@before"  # --before DIR: another checkout's lint, same run


def commands(jobs: int, before: Path | None = None) -> dict[str, list[str]]:
    lint = [sys.executable, "-m", "corevo_obs.cli.main", "lint", "--jobs", str(jobs)]
    return {
        "corevo-obs": lint,
        **({BEFORE: ["env", f"PYTHONPATH={before}", *lint]} if before else {}),
        "flake8-async": [sys.executable, "-m", "flake8", "--isolated", "--select", "ASYNC",
                         "--exit-zero", "--jobs", str(jobs)],
        "ruff": [shutil.which("ruff") or "ruff", "check", "--isolated", "--select", "ASYNC",
                 "--no-cache", "--exit-zero", "--output-format", "concise", "--quiet"],
    }


def cached_commands(jobs: int, cache: Path, before: Path | None = None) -> dict[str, list[str]]:
    """The same commands with a cache dir (flake8 has none)."""
    cmds = commands(jobs, before)
    for name in ("corevo-obs", BEFORE):
        if name in cmds:
            cmds[name] = [*cmds[name], "--cache-dir", str(cache / name)]
    cmds["ruff"] = [c for c in cmds["ruff"] if c != "--no-cache"] + [
        "--cache-dir", str(cache / "ruff")]
    return cmds


MODULE = '''"""Generated service module {i} of {n}: helpers, chains across modules, offloads."""
import asyncio
import json
import os
import subprocess
import time
from pathlib import Path

from {up_pkg} import {up_mod} as upstream

REPORT = "report"
CACHE = "cache"


def load_{i}(key, trust_env=False):
    if key == REPORT:
        with open(f"/srv/{{key}}.json") as fh:
            return json.load(fh)
    if trust_env:
        return Path.home().joinpath(".netrc").read_text()
    return {{"key": key}}


def render_{i}(rows):
    return "\\n".join(str(r) for r in sorted(rows))


def persist_{i}(path, data):
    upstream.write_{up}(path, data)


def write_{i}(path, data):
    with open(path, "w") as fh:
        fh.write(data)


class Store{i}:
    def __init__(self, root):
        self.root = root

    def get(self, name):
        return (Path(self.root) / name).read_bytes()

    def size(self, name):
        return len(name)


async def handler_{i}(request):
    rows = load_{i}(CACHE)
    time.sleep(0.01)
    return render_{i}(rows)


async def report_{i}(request):
    return load_{i}(REPORT)


async def save_{i}(path, data):
    persist_{i}(path, data)
    await asyncio.to_thread(write_{i}, path, data)


async def fetch_{i}(store: Store{i}, name):
    store.size(name)
    data = store.get(name)
    loop = asyncio.get_running_loop()
    more = await loop.run_in_executor(None, store.get, name)
    return data + more


async def spawn_{i}(cmd):
    proc = await asyncio.create_subprocess_exec(*cmd)
    await proc.wait()
    subprocess.run(cmd, check=False)
    return os.path.join("a", "b")
'''


def generate_tree(root: Path, modules: int, per_package: int = 50) -> list[str]:
    """``modules`` async service modules in packages of ``per_package``; each one's
    ``persist_i`` chains into the previous module's ``write``. Returns the file paths."""
    def place(i: int) -> tuple[str, str]:
        pkg, mod = divmod(i, per_package)
        return f"svc.p{pkg:03d}", f"m{mod:03d}"

    (root / "svc").mkdir(parents=True, exist_ok=True)
    (root / "svc" / "__init__.py").write_text("")
    for i in range(modules):
        pkg, mod = place(i)
        up = (i - 1) % modules
        up_pkg, up_mod = place(up)
        folder = root.joinpath(*pkg.split("."))
        folder.mkdir(exist_ok=True)
        (folder / "__init__.py").write_text("")
        (folder / f"{mod}.py").write_text(MODULE.format(i=i, n=modules, up=up, up_pkg=up_pkg,
                                                        up_mod=up_mod))
    return sorted(str(p) for p in root.rglob("*.py"))


REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO / "tests" / "lint_corpus"


def own_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment with this checkout first on the path: the tools run in another
    directory, where ``python -m corevo_obs...`` would import an installed copy instead."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    return env
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


def run(cmd: list[str], files_arg: list[str], cwd: str | Path,
        env: dict[str, str] | None = None) -> tuple[float, set[Line]]:
    wall, found, _ = run_measured(cmd, files_arg, cwd, env)
    return wall, found


def run_measured(cmd: list[str], files_arg: list[str], cwd: str | Path,
                 env: dict[str, str] | None = None) -> tuple[float, set[Line], int]:
    """Wall time, blocking lines reported, and peak RSS in KiB of the largest process of
    the run (``wait4``'s rusage covers the tool and the workers it reaped)."""
    env = own_env(env)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen([*cmd, *files_arg], cwd=cwd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode not in (0, 1, 2) or "Traceback" in stderr:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}): {stderr[-2000:]}")
    return wall, blocking_lines(stdout), usage.ru_maxrss


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


PHASES = ("cold", "warm", "warm, 1 changed")


def copy_sample(files: list[str], tree: Path, into: Path) -> list[str]:
    """The sample copied under ``into`` (a changed file must not touch the real tree)."""
    out = []
    for f in files:
        target = into / Path(f).relative_to(tree)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, target)
        out.append(str(target))
    return out


PARSE_FLOOR = ("import ast, sys\n"
               "for f in sys.argv[1:]:\n"
               "    with open(f, 'rb') as fh:\n"
               "        ast.parse(fh.read(), f)\n")


def parse_floor(files: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Wall time of a process that only reads and parses every file, one by one: what
    no AST lint run as a process can beat on one core (issue 25: cold within 2x)."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", PARSE_FLOOR, *files], cwd=cwd, check=True, env=env)
    return time.perf_counter() - start


def timing(files: list[str], tools: list[str], rounds: int, jobs: int, work: Path,
           changed: str, before: Path | None = None) -> None:
    """Cold, warm and one-file-changed wall times per tool, interleaved; ratios printed."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    walls: dict[tuple[str, str], list[float]] = {(t, p): [] for t in tools for p in PHASES}
    rss: dict[tuple[str, str], list[int]] = {(t, p): [] for t in tools for p in PHASES}
    found: dict[str, set[Line]] = {}
    original = Path(changed).read_bytes()
    cwd = work / "cwd"  # no project config is picked up
    cwd.mkdir()
    for name in tools:  # untimed: writes the tools' own bytecode caches
        run(commands(jobs, before)[name], files[:20], cwd, env)
    floors: list[float] = []
    for r in range(rounds):
        floors.append(parse_floor(files, cwd, env))
        order = tools[r % len(tools):] + tools[: r % len(tools)]
        for name in order:
            cache = work / f"cache-{r}-{name}"
            cmd = cached_commands(jobs, cache, before)[name]
            wall, found[name], peak = run_measured(cmd, files, cwd, env)
            walls[name, "cold"].append(wall)
            rss[name, "cold"].append(peak)
            if name == "flake8-async":  # no cache: every run is a cold one
                for phase in PHASES[1:]:
                    walls[name, phase].append(wall)
                    rss[name, phase].append(peak)
                continue
            wall, _, peak = run_measured(cmd, files, cwd, env)
            walls[name, "warm"].append(wall)
            rss[name, "warm"].append(peak)
            Path(changed).write_bytes(original + b"\n# edited\n")
            try:
                wall, _, peak = run_measured(cmd, files, cwd, env)
            finally:
                Path(changed).write_bytes(original)
            walls[name, "warm, 1 changed"].append(wall)
            rss[name, "warm, 1 changed"].append(peak)
        print(f"round {r + 1}: " + ", ".join(
            f"{n} {walls[n, 'cold'][-1]:.2f}/{walls[n, 'warm'][-1]:.2f}/"
            f"{walls[n, 'warm, 1 changed'][-1]:.2f}s" for n in tools), flush=True)
    print("median wall time, s (cold = empty cache; warm = nothing changed; "
          "1 changed = one module edited)")
    print(f"{'tool':13s} " + " ".join(f"{p:>16s}" for p in PHASES) + "   blocking lines")
    for name in tools:
        print(f"{name:13s} " + " ".join(f"{statistics.median(walls[name, p]):16.2f}"
                                        for p in PHASES) + f"   {len(found[name])}")
    print("median peak RSS of the largest process, MB")
    for name in tools:
        print(f"{name:13s} " + " ".join(f"{statistics.median(rss[name, p]) / 1024:16.1f}"
                                        for p in PHASES))
    floor = statistics.median(floors)
    cold = statistics.median(walls["corevo-obs", "cold"])
    warm = statistics.median(walls["corevo-obs", "warm"])
    print(f"parse floor (one process reads and parses every file) {floor:.2f} s; "
          f"corevo-obs cold / floor {cold / floor:.2f}x (target <= 2x); "
          f"warm {warm:.2f} s (target <= 0.3 s on 1,000 files)")
    if BEFORE in tools:
        print(f"{BEFORE} cold / floor "
              f"{statistics.median(walls[BEFORE, 'cold']) / floor:.2f}x")
    for peer in tools[1:]:
        ratios = []
        for phase in PHASES:
            pairs = zip(walls[peer, phase], walls["corevo-obs", phase], strict=True)
            ratios.append(f"{phase} {statistics.median(p / o for p, o in pairs):.2f}x")
        print(f"{peer} / corevo-obs: " + ", ".join(ratios) + " (>1: corevo-obs faster)")
    for peer in tools[1:]:
        shared = found[peer] & found["corevo-obs"]
        print(f"of {peer}'s {len(found[peer])} lines corevo-obs reports {len(shared)}, "
              f"and {len(found['corevo-obs'] - found[peer])} more")
        for path, line in sorted(found[peer] - found["corevo-obs"])[:20]:
            print(f"    only {peer}: {path}:{line}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generated", type=int, default=0, metavar="N",
                    help="lint a generated tree of N async modules instead of site-packages")
    ap.add_argument("--tree", type=Path, default=Path(site.getsitepackages()[0]))
    ap.add_argument("--files", type=int, default=2000, help="sample size; 0 = every file")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--tools", default="corevo-obs,flake8-async,ruff",
                    help="comma list; corevo-obs is always run (it is the baseline)")
    ap.add_argument("--before", type=Path, metavar="DIR",
                    help="also time the lint of another checkout (e.g. `git archive` of the "
                    "base commit) in the same interleaved rounds, as corevo-obs@before")
    ap.add_argument("--corpus", action="store_true",
                    help="recall and precision on the labelled corpus instead of timing")
    args = ap.parse_args()
    if args.corpus:
        print_corpus_scores()
        return
    tools = ["corevo-obs", *(t for t in args.tools.split(",") if t and t != "corevo-obs")]
    if args.before:
        tools.insert(1, BEFORE)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.generated:
            files = generate_tree(work / "tree", args.generated)
            what = f"a generated tree of {args.generated} async modules"
        else:
            files = copy_sample(python_files(args.tree, args.files or None), args.tree,
                                work / "tree")
            what = f"a copy of {args.tree}"
        size = sum(os.path.getsize(f) for f in files) / 1e6
        print(f"{len(files)} files, {size:.1f} MB: {what}; {args.jobs} jobs, "
              f"{os.cpu_count()} CPUs, {args.rounds} rounds, load {os.getloadavg()[0]:.1f}")
        changed = next(f for f in files if b"async def" in Path(f).read_bytes())
        timing(files, tools, args.rounds, args.jobs, work, changed, args.before)


if __name__ == "__main__":
    main()
