"""Warm runs (corevo_obs/tooling/lint/cache.py): the same findings as a cold run, a changed helper
changes its callers' findings although they come from the cache, and a cache directory
written by someone else (corrupt, truncated, forged shape, symlinks, FIFOs) is a miss,
never a crash or a wrong finding."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corevo_obs.tooling.lint import LintConfig, lint_paths, load_catalog, load_config
from corevo_obs.tooling.lint.cache import LintCache, decode, encode
from corevo_obs.tooling.lint.runner import iter_files, module_name
from corevo_obs.tooling.lint.scan import scan_source
from tests.test_lint_peers import _bench  # loads bench/lint_bench.py

TESTS = Path(__file__).parent
TREES = [(TESTS / "lint_corpus", load_config(TESTS / "lint_corpus" / "pyproject.toml")),
         (TESTS / "lint_eval", LintConfig(offload_methods={"submit_blocking": 0}))]

HELPER_BLOCKS = "import time\n\ndef pause(s):\n    time.sleep(s)\n"
HELPER_CLEAN = "def pause(s):\n    return s\n"
CALLER = "from pkg.helpers import pause\n\nasync def handler():\n    pause(1)\n"


def tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def entries(cache_dir: Path) -> list[Path]:
    """The run entries (``*.json``) and the project's pack of per-file summaries."""
    return sorted([*cache_dir.glob("*.json"), *cache_dir.glob("*.pack")])


def run(paths: list[str], config: LintConfig, cache: LintCache | None) -> list[object]:
    result = lint_paths(paths, config, jobs=1, cache=cache)
    return [*result.findings, *result.errors]


@pytest.mark.parametrize(("root", "config"), TREES, ids=["corpus", "eval"])
def test_every_summary_survives_the_round_trip(root: Path, config: LintConfig) -> None:
    """encode -> JSON -> decode gives back an equal FileResult for every labelled file:
    guards, arguments, bytes and tuple constants, noqa sets, re-exports."""
    catalog = load_catalog(config)
    checked = 0
    for path in iter_files([str(root)]):
        module, is_package = module_name(path)
        result = scan_source(path, module, Path(path).read_bytes(), catalog,
                             is_package=is_package)
        again = decode(json.loads(json.dumps(encode(result))), path, module)
        assert again == result, path
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize(("root", "config"), TREES, ids=["corpus", "eval"])
def test_cold_and_warm_runs_report_the_same(tmp_path: Path, root: Path,
                                            config: LintConfig) -> None:
    paths = [str(root)]
    plain = run(paths, config, None)
    assert plain  # the trees are labelled with findings
    cache_dir = tmp_path / "cache"
    cold = LintCache.at(cache_dir)
    assert run(paths, config, cold) == plain
    assert cold.stats.hits == 0 and cold.stats.stored > 0
    whole = LintCache.at(cache_dir)
    assert run(paths, config, whole) == plain
    assert whole.stats.trees == 1  # nothing changed: the run's findings in one entry
    # without the run entry, every file's summary comes from its own entry
    stored = {p.name for p in entries(cache_dir)}
    for p in entries(cache_dir):
        if b'"tree":true' in p.read_bytes():
            p.unlink()
    per_file = LintCache.at(cache_dir)
    assert run(paths, config, per_file) == plain
    assert per_file.stats.hits == cold.stats.stored - 1 and per_file.stats.trees == 0
    assert {p.name for p in entries(cache_dir)} == stored


def test_a_changed_helper_changes_its_unchanged_callers_findings(tmp_path: Path) -> None:
    root = tree(tmp_path / "src", {"pkg/__init__.py": "", "pkg/helpers.py": HELPER_BLOCKS,
                                   "pkg/app.py": CALLER})
    cache_dir = tmp_path / "cache"
    first = run([str(root)], LintConfig(), LintCache.at(cache_dir))
    assert [f.code for f in first] == ["COB110"]  # type: ignore[attr-defined]

    (root / "pkg" / "helpers.py").write_text(HELPER_CLEAN)
    warm = LintCache.at(cache_dir)
    assert run([str(root)], LintConfig(), warm) == []
    assert warm.stats.hits == 1  # app.py was not parsed again, its site re-classified

    (root / "pkg" / "helpers.py").write_text(HELPER_BLOCKS + "\n# touched\n")
    again = LintCache.at(cache_dir)
    assert [f.code for f in run([str(root)], LintConfig(), again)] == ["COB110"]  # type: ignore[attr-defined]
    assert again.stats.hits == 1


RETRY = ("async def retry(operation):\n    return operation()\n")
HANDS = "from pkg.helpers import pause\nfrom pkg.retry import retry\n\nasync def handler():\n" \
    "    await retry(pause)\n"


def test_a_helper_handed_to_a_wrapper_is_read_and_followed_from_the_cache(
        tmp_path: Path) -> None:
    """``retry(pause)`` with ``retry`` calling its parameter on the loop: the finding is at
    that call, the helper's module (no ``async`` in it) is read because it is handed, and
    a warm run re-classifies it from the cached summaries when only the helper changes."""
    root = tree(tmp_path / "src", {"pkg/__init__.py": "", "pkg/helpers.py": HELPER_BLOCKS,
                                   "pkg/retry.py": RETRY, "pkg/app.py": HANDS})
    cache_dir = tmp_path / "cache"
    first = run([str(root)], LintConfig(), LintCache.at(cache_dir))
    assert [(Path(f.path).name, f.line, f.code) for f in first] == [  # type: ignore[attr-defined]
        ("retry.py", 2, "COB110")]
    assert "operation [pause, handed in at app.py:5] -> time.sleep()" in first[0].message  # type: ignore[attr-defined]
    assert run([str(root)], LintConfig(), None) == first  # cold, without a cache

    (root / "pkg" / "helpers.py").write_text(HELPER_CLEAN)
    warm = LintCache.at(cache_dir)
    assert run([str(root)], LintConfig(), warm) == []
    assert warm.stats.hits == 3  # every file but the changed helper came from the cache


FACTORY_SYNC = ("import io\nimport httpx\n\ndef make():\n    return httpx.Client(verify=False)\n\n"
                "def buf():\n    return open('f', 'rb')\n")
FACTORY_ASYNC = ("import io\nimport httpx\n\ndef make() -> httpx.AsyncClient:\n"
                 "    return httpx.AsyncClient(verify=False)\n\n"
                 "def buf():\n    return io.BytesIO()\n")
USER = ("import zipfile\nfrom pkg.factory import buf, make\n\nasync def handler(u):\n"
        "    make().get(u)\n    zipfile.ZipFile(buf())\n")


def test_a_changed_return_type_changes_its_unchanged_callers_findings(tmp_path: Path) -> None:
    """The receiver's type comes from a helper of another module (returns.py): editing
    what the helper returns re-classifies the caller's cached summary."""
    root = tree(tmp_path / "src", {"pkg/__init__.py": "", "pkg/factory.py": FACTORY_SYNC,
                                   "pkg/app.py": USER})
    cache_dir = tmp_path / "cache"
    first = run([str(root)], LintConfig(), LintCache.at(cache_dir))
    assert [(f.line, f.code) for f in first] == [  # type: ignore[attr-defined]
        (5, "COB101"), (6, "COB100"), (6, "COB110")]
    assert run([str(root)], LintConfig(), None) == first

    (root / "pkg" / "factory.py").write_text(FACTORY_ASYNC)
    warm = LintCache.at(cache_dir)
    assert run([str(root)], LintConfig(), warm) == []
    assert warm.stats.hits == 2  # app.py (and pkg/__init__.py) came from their entries
    assert run([str(root)], LintConfig(), None) == []

    (root / "pkg" / "factory.py").write_text(FACTORY_SYNC)
    again = LintCache.at(cache_dir)
    assert run([str(root)], LintConfig(), again) == first
    assert again.stats.trees == 1  # the first run's files again: its findings


HELPER_USER = ("import zipfile\nfrom pkg.factory import buf\n\ndef names():\n"
               "    return zipfile.ZipFile(buf()).namelist()\n\nasync def handler():\n"
               "    names()\n")


def test_a_helper_on_a_buffer_made_elsewhere_follows_what_it_becomes(tmp_path: Path) -> None:
    """A sync helper's ``ZipFile(buf())``: blocking while ``buf`` (another module) opens a
    file, not once it returns a ``BytesIO`` — and the helper's cached summary follows."""
    root = tree(tmp_path / "src", {"pkg/__init__.py": "", "pkg/factory.py": FACTORY_SYNC,
                                   "pkg/app.py": HELPER_USER})
    cache_dir = tmp_path / "cache"
    first = run([str(root)], LintConfig(), LintCache.at(cache_dir))
    assert [(f.line, f.code) for f in first] == [(8, "COB110")]  # type: ignore[attr-defined]
    (root / "pkg" / "factory.py").write_text(FACTORY_ASYNC)
    warm = LintCache.at(cache_dir)
    assert run([str(root)], LintConfig(), warm) == []
    assert warm.stats.hits >= 1  # app.py's summary came from its entry
    assert run([str(root)], LintConfig(), None) == []


BASE_BLOCKS = "class Base:\n    def save(self):\n        open('f').read()\n"
BASE_CLEAN = "class Base:\n    def save(self):\n        return 1\n"
SUBCLASS = ("from pkg.base import Base\n\nclass Local(Base):\n    async def run(self):\n"
            "        self.save()\n\nasync def handler(x: Local):\n    x.save()\n")


def test_a_changed_base_class_changes_its_unchanged_subclass_findings(tmp_path: Path) -> None:
    """``self.save()`` and ``x.save()`` on a subclass run the base's ``save`` (another
    module, read only because the calls lead there): the subclass's cached summary
    follows what the base's method does."""
    root = tree(tmp_path / "src", {"pkg/__init__.py": "", "pkg/base.py": BASE_BLOCKS,
                                   "pkg/app.py": SUBCLASS})
    cache_dir = tmp_path / "cache"
    first = run([str(root)], LintConfig(), LintCache.at(cache_dir))
    assert [(f.line, f.code) for f in first] == [  # type: ignore[attr-defined]
        (5, "COB110"), (8, "COB110")]
    assert run([str(root)], LintConfig(), None) == first
    (root / "pkg" / "base.py").write_text(BASE_CLEAN)
    warm = LintCache.at(cache_dir)
    assert run([str(root)], LintConfig(), warm) == []
    assert warm.stats.hits >= 1  # app.py's summary came from its entry
    assert run([str(root)], LintConfig(), None) == []


def test_a_changed_config_or_catalog_misses_every_entry(tmp_path: Path) -> None:
    root = tree(tmp_path / "src", {"app.py": "import time\n\nasync def h():\n    time.sleep(1)\n"})
    cache_dir = tmp_path / "cache"
    assert len(run([str(root)], LintConfig(), LintCache.at(cache_dir))) == 1
    ignored = LintCache.at(cache_dir)
    assert run([str(root)], LintConfig(ignore=("COB104",)), ignored) == []
    assert ignored.stats.hits == 0 and ignored.stats.trees == 0
    extended = LintCache.at(cache_dir)
    config = LintConfig(extend_calls={"COB100": ("json.dumps",)})
    assert len(run([str(root)], config, extended)) == 1
    assert extended.stats.hits == 0


def _forged(good: bytes) -> bytes:
    """The entry or pack with its findings replaced by a wrong shape, checksum recomputed."""
    from corevo_obs.tooling.lint.cache import FORMAT, MAGIC, PACK_MAGIC, digest
    head, _, body = good.partition(b"\n")
    if head.startswith(PACK_MAGIC):
        name, *lines = body.split(b"\n")
        out = [name]
        for line in lines:
            if line:
                key, path, entry = line.split(b"\t")
                shape = json.loads(entry)
                if "result" in shape:
                    shape["result"]["findings"] = [["not", "a", "finding"]]
                else:  # a file's note that it does not run on the loop
                    shape["loop"] = "no"
                line = b"\t".join([key, path, json.dumps(shape).encode()])
            out.append(line)
        forged = b"\n".join(out)
        return b"%s %d %s\n%s" % (PACK_MAGIC, FORMAT, digest(forged).encode(), forged)
    shape = json.loads(body)
    shape["findings"] = [["not", "a", "finding"]]
    forged = json.dumps(shape).encode()
    return b"%s %d %s\n%s" % (MAGIC, FORMAT, digest(forged).encode(), forged)


def _garbage(entry: Path) -> dict[str, bytes]:
    good = entry.read_bytes()
    head, _, body = good.partition(b"\n")
    return {
        "empty": b"",
        "truncated": good[: len(good) // 2],
        "flipped": good[:-20] + bytes([good[-20] ^ 1]) + good[-19:],
        "binary": os.urandom(4096),
        "huge-numbers": head + b"\n" + b"[" * 100_000,
        "wrong shape, right checksum": _forged(good),
    }


@pytest.mark.parametrize("kind", ["empty", "truncated", "flipped", "binary", "huge-numbers",
                                  "wrong shape, right checksum"])
def test_a_corrupt_entry_is_a_miss_and_is_rewritten(tmp_path: Path, kind: str) -> None:
    root = tree(tmp_path / "src", {"pkg/__init__.py": "", "pkg/helpers.py": HELPER_BLOCKS,
                                   "pkg/app.py": CALLER})
    cache_dir = tmp_path / "cache"
    want = run([str(root)], LintConfig(), LintCache.at(cache_dir))
    good = {p: p.read_bytes() for p in entries(cache_dir)}
    for path in good:
        path.write_bytes(_garbage(path)[kind])
    cache = LintCache.at(cache_dir)
    assert run([str(root)], LintConfig(), cache) == want
    assert len(good) == 2  # the run's entry, the pack (app.py, helpers.py: a chain reaches it)
    # a forged pack is read (its checksum holds) but each of its two entries is refused
    # forged: the run's entry, app.py's and helpers.py's summaries, __init__.py's note
    assert cache.stats.rejected == (4 if kind == "wrong shape, right checksum" else 2)
    assert cache.stats.hits == 0
    assert {p: p.read_bytes() for p in entries(cache_dir)} == good  # rewritten whole


def test_symlinks_fifos_and_foreign_entries_are_never_trusted_or_followed(
        tmp_path: Path) -> None:
    root = tree(tmp_path / "src", {"app.py": CALLER.replace("pkg.helpers", "helpers"),
                                   "helpers.py": HELPER_BLOCKS})
    cache_dir = tmp_path / "cache"
    want = run([str(root)], LintConfig(), LintCache.at(cache_dir))
    outside = tmp_path / "outside.json"
    names = [p.name for p in entries(cache_dir)]
    assert len(names) == 2  # the run's entry, the pack (app.py, helpers.py)
    for p in entries(cache_dir):
        outside.write_bytes(p.read_bytes())  # a valid entry, reached through a link
        p.unlink()
        p.symlink_to(outside)
    before = outside.read_bytes()
    cache = LintCache.at(cache_dir)
    assert run([str(root)], LintConfig(), cache) == want
    assert cache.stats.rejected == 2 and cache.stats.hits == 0
    assert all(not (cache_dir / n).is_symlink() for n in names)  # replaced by real entries
    assert outside.read_bytes() == before  # never written through the link

    for name in names:  # FIFOs: opened without blocking, refused
        (cache_dir / name).unlink()
        os.mkfifo(cache_dir / name)
    cache = LintCache.at(cache_dir)
    assert run([str(root)], LintConfig(), cache) == want
    assert cache.stats.rejected == 2

    for p in entries(cache_dir):  # writable by others: refused
        p.chmod(0o666)
    cache = LintCache.at(cache_dir)
    assert run([str(root)], LintConfig(), cache) == want
    assert cache.stats.rejected == 2 and cache.stats.hits == 0
    if os.geteuid() == 0:  # owned by another user: refused
        for p in entries(cache_dir):
            os.chown(p, 65534, -1)
        cache = LintCache.at(cache_dir)
        assert run([str(root)], LintConfig(), cache) == want
        assert cache.stats.rejected == 2 and cache.stats.hits == 0


def test_a_cache_dir_that_is_a_symlink_or_a_file_is_not_used(tmp_path: Path) -> None:
    root = tree(tmp_path / "src", {"app.py": "import time\n\nasync def h():\n    time.sleep(1)\n"})
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    cache = LintCache.at(tmp_path / "link")
    assert len(run([str(root)], LintConfig(), cache)) == 1
    assert "symlink" in cache.note
    assert list((tmp_path / "elsewhere").iterdir()) == []

    (tmp_path / "project").mkdir()
    (tmp_path / "project" / ".corevo-cache").symlink_to(tmp_path / "elsewhere")
    cache = LintCache.for_project(tmp_path / "project")
    assert len(run([str(root)], LintConfig(), cache)) == 1
    assert "symlink" in cache.note and list((tmp_path / "elsewhere").iterdir()) == []

    (tmp_path / "file").write_text("x")
    cache = LintCache.at(tmp_path / "file" / "cache")
    assert len(run([str(root)], LintConfig(), cache)) == 1
    assert cache.note


def test_prune_keeps_this_runs_entries_and_drops_stale_temps(tmp_path: Path) -> None:
    root = tree(tmp_path / "src", {"app.py": "import time\n\nasync def h():\n    time.sleep(1)\n"})
    cache_dir = tmp_path / "cache"
    run([str(root)], LintConfig(), LintCache.at(cache_dir))
    kept = {p.name for p in entries(cache_dir)}
    old = 1_000_000_000.0
    for i in range(2100):  # entries of files long gone
        stale = cache_dir / f"{i:064x}.json"
        stale.write_text("{}")
        os.utime(stale, (old, old))
    temp = cache_dir / f".{'a' * 64}.json.123.deadbeef.tmp"
    temp.write_text("half")
    os.utime(temp, (old, old))
    fresh_temp = cache_dir / f".{'b' * 64}.json.124.deadbeef.tmp"
    fresh_temp.write_text("being written")
    unrelated = cache_dir / "notes.txt"
    unrelated.write_text("not ours")
    for p in entries(cache_dir):  # a run answered whole does not prune: make it re-read
        if b'"tree":true' in p.read_bytes():
            p.unlink()
    run([str(root)], LintConfig(), LintCache.at(cache_dir))
    assert {p.name for p in entries(cache_dir)} == kept
    assert not temp.exists() and fresh_temp.exists() and unrelated.exists()


def _cli(cwd: Path, *args: str, env: dict[str, str] | None = None
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "lint", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_cli_cache_flags_and_environment(tmp_path: Path) -> None:
    tree(tmp_path, {"app.py": "import time\n\nasync def h():\n    time.sleep(1)\n"})
    first = _cli(tmp_path, ".")
    assert first.returncode == 1 and "0 unchanged (cache)" in first.stderr
    assert entries(tmp_path / ".corevo-cache" / "lint")
    assert (tmp_path / ".corevo-cache" / "lint" / ".gitignore").read_text().endswith("*\n")
    second = _cli(tmp_path, ".")
    assert second.stdout == first.stdout and "none changed (cache)" in second.stderr

    off = _cli(tmp_path, ".", "--no-cache")
    assert off.stdout == first.stdout and "cache" not in off.stderr

    chosen = tmp_path / "chosen"
    _cli(tmp_path, "app.py", "--cache-dir", str(chosen))
    assert entries(chosen)
    env_dir = tmp_path / "from-env"
    by_env = _cli(tmp_path, "app.py", env={"COREVO_LINT_CACHE_DIR": str(env_dir)})
    assert by_env.stdout == first.stdout and entries(env_dir)

    (tmp_path / "blocked").write_text("a file where the cache dir should be")
    bad = _cli(tmp_path, ".", "--cache-dir", str(tmp_path / "blocked" / "c"))
    assert bad.returncode == 1 and bad.stdout == first.stdout
    assert "note: cache" in bad.stderr and "Traceback" not in bad.stderr


def test_a_warm_run_parses_nothing_and_one_edit_parses_one_file(tmp_path: Path) -> None:
    """On the bench's generated tree (chains cross modules): the unchanged re-run is one
    entry, an edited module is the only file parsed, and the findings stay exact."""
    root = tmp_path / "tree"
    _bench().generate_tree(root, 300)
    cache_dir = tmp_path / "cache"
    start = time.perf_counter()
    cold = run([str(root)], LintConfig(), LintCache.at(cache_dir))
    cold_s = time.perf_counter() - start
    assert len(cold) == 5 * 300

    start = time.perf_counter()
    warm = LintCache.at(cache_dir)
    assert run([str(root)], LintConfig(), warm) == cold
    warm_s = time.perf_counter() - start
    assert warm.stats.trees == 1 and warm.stats.hits == 0
    assert warm_s < cold_s / 3, (warm_s, cold_s)

    edited = root / "svc" / "p000" / "m007.py"  # m008 chains into its write_7
    edited.write_text(edited.read_text().replace('with open(path, "w") as fh:\n'
                                                 '        fh.write(data)', "return data"))
    one = LintCache.at(cache_dir)
    after = run([str(root)], LintConfig(), one)
    assert one.stats.hits == 299  # every other module from its entry
    assert after == run([str(root)], LintConfig(), None)
    assert len(after) == len(cold) - 1  # m008's save_8 -> persist_8 -> write_7 is gone


def _pack(cache_dir: Path) -> Path:
    (pack,) = cache_dir.glob("*.pack")
    return pack


def _pack_paths(cache_dir: Path) -> list[str]:
    """The file paths the pack holds a summary of."""
    lines = _pack(cache_dir).read_bytes().split(b"\n")[2:]
    return sorted(json.loads(line.split(b"\t")[1]) for line in lines if line)


def test_a_runs_summaries_are_one_pack_that_drops_what_is_gone(tmp_path: Path) -> None:
    """A cold run writes one pack, not a file per summary; a later run that scans anything
    rewrites it: an edited file's old summary and a deleted file's are dropped, the
    summaries of files it did not look at (another path argument) are kept."""
    root = tree(tmp_path / "src", {"pkg/__init__.py": "", "pkg/helpers.py": HELPER_BLOCKS,
                                   "pkg/app.py": CALLER, "pkg/other.py": CALLER})
    cache_dir = tmp_path / "cache"
    run([str(root)], LintConfig(), LintCache.at(cache_dir))
    pkg = root / "pkg"
    # __init__.py's line only says that it runs nothing on the loop (no run reads it again)
    assert _pack_paths(cache_dir) == [str(pkg / n) for n in ("__init__.py", "app.py",
                                                             "helpers.py", "other.py")]
    assert len(list(cache_dir.glob("*.json"))) == 1  # the run's entry

    (pkg / "other.py").unlink()
    (pkg / "app.py").write_text(CALLER + "\n# edited\n")
    edited = LintCache.at(cache_dir)
    run([str(root)], LintConfig(), edited)
    assert edited.stats.hits == 1 and edited.stats.stored == 2  # app.py, the run's entry
    assert _pack_paths(cache_dir) == [str(pkg / n) for n in ("__init__.py", "app.py",
                                                             "helpers.py")]
    before = _pack(cache_dir).read_bytes()

    (pkg / "app.py").write_text(CALLER + "\n# edited again\n")
    one = LintCache.at(cache_dir)  # one file named: the pack keeps helpers.py's summary
    run([str(pkg / "app.py")], LintConfig(), one)
    assert one.stats.stored == 2
    assert _pack_paths(cache_dir) == [str(pkg / n) for n in ("__init__.py", "app.py",
                                                             "helpers.py")]
    assert _pack(cache_dir).read_bytes() != before
    whole = LintCache.at(cache_dir)
    assert run([str(root)], LintConfig(), whole) == run([str(root)], LintConfig(), None)
    assert whole.stats.hits == 2 and whole.stats.misses == 1  # the run's entry only


def test_a_pack_of_another_project_or_with_a_forged_line_is_a_miss(tmp_path: Path) -> None:
    """The pack's name and first line name its project (config, lint, import roots): a
    pack copied under another project's name is refused whole; a line whose checksum was
    recomputed but that names another file is refused alone."""
    from corevo_obs.tooling.lint.cache import FORMAT, PACK_MAGIC, digest
    root = tree(tmp_path / "src", {"pkg/__init__.py": "", "pkg/helpers.py": HELPER_BLOCKS,
                                   "pkg/app.py": CALLER})
    cache_dir = tmp_path / "cache"
    want = run([str(root)], LintConfig(), LintCache.at(cache_dir))
    for p in cache_dir.glob("*.json"):
        p.unlink()
    pack = _pack(cache_dir)
    good = pack.read_bytes()
    other = cache_dir / f"{'0' * 64}.pack"  # someone else's name for the same bytes
    other.write_bytes(good)
    pack.unlink()
    cache = LintCache.at(cache_dir)
    assert run([str(root)], LintConfig(), cache) == want
    assert cache.stats.hits == 0 and pack.read_bytes() == good

    for p in cache_dir.glob("*.json"):
        p.unlink()
    head, _, body = good.partition(b"\n")
    swapped = body.replace(b"pkg/app.py", b"pkg/elsewhere.py")  # app.py's line, renamed
    pack.write_bytes(b"%s %d %s\n%s" % (PACK_MAGIC, FORMAT, digest(swapped).encode(), swapped))
    cache = LintCache.at(cache_dir)
    assert run([str(root)], LintConfig(), cache) == want
    assert cache.stats.hits == 1  # helpers.py's line
    assert cache.stats.rejected == 1  # app.py's key, on a line naming another file


def test_parallel_cold_warm_and_edited_runs_report_what_an_uncached_run_does(
        tmp_path: Path) -> None:
    """With two processes scanning (the forked one sends its summaries and their pack
    lines back), cold, warm and one-edited runs equal a run without the cache."""
    root = tmp_path / "tree"
    _bench().generate_tree(root, 120)
    cache_dir = tmp_path / "cache"

    def parallel(cache: LintCache | None) -> list[object]:
        result = lint_paths([str(root)], LintConfig(), jobs=2, cache=cache)
        return [*result.findings, *result.errors]

    plain = parallel(None)
    assert len(plain) == 5 * 120
    cold = LintCache.at(cache_dir)
    assert parallel(cold) == plain and cold.stats.stored == 121  # 120 modules, the run
    assert len(_pack_paths(cache_dir)) == 124  # and the 4 __init__.py's notes
    warm = LintCache.at(cache_dir)
    assert parallel(warm) == plain and warm.stats.trees == 1
    edited = root / "svc" / "p000" / "m007.py"
    edited.write_text(edited.read_text().replace('with open(path, "w") as fh:\n'
                                                 '        fh.write(data)', "return data"))
    one = LintCache.at(cache_dir)
    after = parallel(one)
    assert one.stats.hits == 119 and after == parallel(None) and len(after) == len(plain) - 1
    assert len(_pack_paths(cache_dir)) == 124


def test_a_file_that_runs_nothing_on_the_loop_is_searched_once_and_read_when_a_chain_needs_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file with no ``async`` (and no loop callback) is deferred; its pack line says so,
    so a later run neither parses nor searches it again: only the edited file is searched.
    When an edit makes a chain reach it, that line is no summary: it is read then, and
    the findings are an uncached run's."""
    from corevo_obs.tooling.lint import runner
    searched: list[int] = []
    real = runner.may_run_on_loop

    def counting(source: bytes, catalog: object) -> bool:
        searched.append(len(source))
        return real(source, catalog)  # type: ignore[arg-type]

    monkeypatch.setattr(runner, "may_run_on_loop", counting)
    idle = "async def handler():\n    return 1\n"
    root = tree(tmp_path / "src", {"pkg/__init__.py": "", "pkg/helpers.py": HELPER_BLOCKS,
                                   "pkg/app.py": idle, "pkg/other.py": idle})
    cache_dir = tmp_path / "cache"
    assert run([str(root)], LintConfig(), LintCache.at(cache_dir)) == []
    assert len(searched) == 4  # every file, once

    searched.clear()
    (root / "pkg" / "other.py").write_text(idle + "\n# edited\n")
    assert run([str(root)], LintConfig(), LintCache.at(cache_dir)) == []
    assert len(searched) == 1  # the edited file only: helpers.py's line says it is idle

    (root / "pkg" / "app.py").write_text(CALLER)  # now a chain reaches helpers.py
    reached = LintCache.at(cache_dir)
    found = run([str(root)], LintConfig(), reached)
    assert found == run([str(root)], LintConfig(), None) and len(found) == 1
    assert reached.stats.misses >= 1  # helpers.py: a note, no summary, so it was read
    again = LintCache.at(cache_dir)
    (root / "pkg" / "other.py").write_text(idle)
    assert run([str(root)], LintConfig(), again) == found
    assert again.stats.hits == 2  # app.py's and helpers.py's summaries, both stored now
