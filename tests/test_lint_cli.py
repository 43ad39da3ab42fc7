"""`corevo-obs lint` as a user runs it: a subprocess on a temp tree, every exit code."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from corevo_obs.tooling.lint.runner import max_jobs

ROOT = Path(__file__).parent.parent
SARIF_SCHEMA = ROOT / "tests" / "data" / "sarif-schema-2.1.0.json"  # OASIS SARIF 2.1.0
BLOCKING = "import time\n\nasync def handler():\n    time.sleep(1)\n"
CLEAN = "import asyncio\n\nasync def handler():\n    await asyncio.sleep(1)\n"


def lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "lint", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


def tree(tmp_path: Path, **files: str) -> Path:
    for name, text in files.items():
        path = tmp_path / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_clean_tree_exits_0(tmp_path: Path) -> None:
    proc = lint(tree(tmp_path, **{"ok.py": CLEAN}), ".")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""


def test_findings_exit_1_in_text_format(tmp_path: Path) -> None:
    tree(tmp_path, **{"app.py": BLOCKING})
    proc = lint(tmp_path, "app.py")
    assert proc.returncode == 1
    assert re.fullmatch(r"app\.py:4:5: COB104 time\.sleep\(\) .*handler \[high\]\n", proc.stdout)


def test_syntax_error_is_reported_and_the_rest_still_checked(tmp_path: Path) -> None:
    tree(tmp_path, **{"broken.py": "async def f(:\n", "app.py": BLOCKING})
    proc = lint(tmp_path, ".")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "broken.py:1:13: COB900 cannot parse file" in proc.stdout
    assert "app.py:4:5: COB104" in proc.stdout


def test_a_chain_into_a_broken_sync_module_reports_it(tmp_path: Path) -> None:
    tree(tmp_path, **{"pkg/__init__.py": "", "pkg/helpers.py": "def f(:\n",
                      "pkg/unrelated.py": "def g(:\n",
                      "pkg/app.py": "from .helpers import f\n\nasync def h():\n    f()\n"})
    proc = lint(tmp_path, ".")
    assert proc.returncode == 2
    assert "helpers.py:1:7: COB900" in proc.stdout
    assert "unrelated.py" not in proc.stdout  # no async in it, no chain into it: not parsed


@pytest.mark.parametrize("args", [[], ["--format", "xml", "."], ["--jobs", "0", "."],
                                  ["missing_dir"], ["--config", "nope.toml", "."]])
def test_usage_errors_exit_2_without_traceback(tmp_path: Path, args: list[str]) -> None:
    proc = lint(tmp_path, *args)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "error" in proc.stderr


def test_json_output(tmp_path: Path) -> None:
    tree(tmp_path, **{"app.py": BLOCKING})
    rows = json.loads(lint(tmp_path, "--format", "json", ".").stdout)
    assert [(r["path"], r["line"], r["code"]) for r in rows] == [("app.py", 4, "COB104")]


def test_sarif_validates_against_the_2_1_0_schema(tmp_path: Path) -> None:
    tree(tmp_path, **{"app.py": BLOCKING, "broken.py": "async def f():\n    x = (\n",
                      "pkg/__init__.py": "", "pkg/io.py":
                      "def _w(p):\n    open(p)\n\nasync def a(p):\n    _w(p)\n"})
    proc = lint(tmp_path, "--format", "sarif", ".")
    assert proc.returncode == 2
    doc = json.loads(proc.stdout)
    schema = json.loads(SARIF_SCHEMA.read_text())
    jsonschema.Draft4Validator(schema).validate(doc)
    run = doc["runs"][0]
    described = {r["id"] for r in run["tool"]["driver"]["rules"]}
    used = {r["ruleId"] for r in run["results"]}
    assert used == {"COB104", "COB110", "COB900"}
    assert used <= described
    for r in run["results"]:
        assert run["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] == r["ruleId"]


def test_baseline_hides_legacy_and_only_shrinks(tmp_path: Path) -> None:
    tree(tmp_path, **{"old.py": BLOCKING})
    assert lint(tmp_path, "--baseline", "bl.json", "--write-baseline", ".").returncode == 0
    assert lint(tmp_path, "--baseline", "bl.json", ".").returncode == 0
    # a new finding is reported, and rewriting the baseline does not absorb it
    (tmp_path / "new.py").write_text(BLOCKING)
    proc = lint(tmp_path, "--baseline", "bl.json", "--write-baseline", ".")
    assert proc.returncode == 1 and "new.py:4:5: COB104" in proc.stdout
    assert "old.py" not in proc.stdout
    # moving the legacy call down a line keeps it baselined
    (tmp_path / "old.py").write_text("\n" + BLOCKING)
    (tmp_path / "new.py").unlink()
    assert lint(tmp_path, "--baseline", "bl.json", ".").returncode == 0
    # fixing it makes the entry stale until the baseline shrinks
    (tmp_path / "old.py").write_text(CLEAN)
    proc = lint(tmp_path, "--baseline", "bl.json", ".")
    assert proc.returncode == 1 and "COB901" in proc.stdout
    assert lint(tmp_path, "--baseline", "bl.json", "--write-baseline", ".").returncode == 0
    assert json.loads((tmp_path / "bl.json").read_text())["entries"] == []


def test_bad_baseline_file_is_a_usage_error(tmp_path: Path) -> None:
    tree(tmp_path, **{"app.py": BLOCKING, "bl.json": "[1, 2]"})
    proc = lint(tmp_path, "--baseline", "bl.json", ".")
    assert proc.returncode == 2 and "bl.json: not a corevo-obs lint baseline" in proc.stderr


@pytest.mark.parametrize("flag, name, text", [
    ("--observed", "deep.json", "[" * 100_000 + "]" * 100_000),
    ("--observed", "deep.json", '{"stalls": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    ("--baseline", "deep.json", "[" * 100_000 + "]" * 100_000),
    ("--config", "deep.toml", "a = " + "[" * 5_000 + "]" * 5_000 + "\n"),
], ids=["observed", "observed-report", "baseline", "config"])
def test_deeply_nested_inputs_are_one_line_and_exit_2(tmp_path: Path, flag: str, name: str,
                                                      text: str) -> None:
    """Nesting someone else chose is bad input, not our RecursionError (exit 3)."""
    tree(tmp_path, **{"app.py": CLEAN, name: text})
    proc = lint(tmp_path, ".", flag, name)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and name in proc.stderr
    assert "internal error" not in proc.stderr


def test_config_errors_name_their_source_all_at_once(tmp_path: Path) -> None:
    tree(tmp_path, **{"app.py": CLEAN, "pyproject.toml":
                      '[tool.corevo-obs.lint]\nblocking = "x"\nignore = ["E501"]\ncolour = 1\n'})
    proc = lint(tmp_path, ".")
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "pyproject.toml [tool.corevo-obs.lint]" in line
    assert "blocking: expected a list" in line and "'E501'" in line and "'colour'" in line


def test_config_extends_the_catalog(tmp_path: Path) -> None:
    tree(tmp_path, **{
        "pyproject.toml": (
            "[tool.corevo-obs.lint]\n"
            'blocking = ["vendor.sdk.upload"]\n'
            'non-blocking = ["os.path.*"]\n'
            'offload = { "mypool.run_blocking" = 0 }\n'
            'extend-calls = { COB105 = ["duckdb.connect"] }\n'
            "bare-noqa = true\n"),
        "app.py": (
            "import os, duckdb, mypool\nfrom vendor import sdk\n\n"
            "async def h(p):\n"
            "    sdk.upload(p)\n"                                    # COB111
            "    duckdb.connect(p)\n"                                # COB105
            "    os.path.exists(p)\n"                                # configured non-blocking
            "    await mypool.run_blocking(lambda: open(p))\n"       # configured offload
            "    open(p)  # noqa\n"),                                # bare noqa allowed
    })
    rows = json.loads(lint(tmp_path, "--format", "json", ".").stdout)
    assert [(r["line"], r["code"]) for r in rows] == [(5, "COB111"), (6, "COB105")]


@pytest.mark.parametrize("switches, reported", [
    ("", []), ("bare-noqa = false\n", [6]), ("peer-noqa = false\n", [5]),
    ("bare-noqa = false\npeer-noqa = false\n", [5, 6]),
])
def test_bare_and_peer_noqa_silence_unless_switched_off(tmp_path: Path, switches: str,
                                                        reported: list[int]) -> None:
    tree(tmp_path, **{
        "pyproject.toml": "[tool.corevo-obs.lint]\n" + switches,
        "app.py": ("import time\n\n\nasync def h():\n"
                   "    time.sleep(1)  # noqa: ASYNC251\n"
                   "    time.sleep(1)  # noqa\n"
                   "    time.sleep(1)  # noqa: COB104\n")})
    rows = json.loads(lint(tmp_path, "--format", "json", ".").stdout)
    assert [r["line"] for r in rows] == reported


def test_config_ignore_exclude_and_markers(tmp_path: Path) -> None:
    tree(tmp_path, **{
        "pyproject.toml": ('[tool.corevo-obs.lint]\nignore = ["COB104"]\n'
                           'exclude = ["legacy/*"]\nmarkers = ["acme.slow"]\n'),
        "app.py": ("import time\nfrom acme import slow\n\n@slow\ndef sync_sdk():\n    pass\n\n"
                   "async def h():\n    time.sleep(1)\n    sync_sdk()\n"),
        "legacy/old.py": "import os\n\nasync def h():\n    os.system('x')\n",
    })
    rows = json.loads(lint(tmp_path, "--format", "json", ".").stdout)
    assert [(r["path"], r["line"], r["code"]) for r in rows] == [("app.py", 10, "COB111")]


def test_parallel_run_equals_serial(tmp_path: Path) -> None:
    for i in range(220):
        tree(tmp_path, **{f"pkg/m{i}.py": BLOCKING if i % 7 == 0 else CLEAN})
    (tmp_path / "pkg" / "__init__.py").write_text("")
    serial = lint(tmp_path, "--no-cache", "--jobs", "1", "--format", "json", ".")
    parallel = lint(tmp_path, "--no-cache", "--jobs", "2", "--format", "json", ".")
    assert serial.returncode == parallel.returncode == 1
    assert serial.stdout == parallel.stdout
    assert len(json.loads(serial.stdout)) == 32


@pytest.mark.skipif(max_jobs() < 2, reason="one CPU: --jobs 2 runs in process")
def test_parallel_run_is_byte_identical_on_chains_and_corpus(tmp_path: Path) -> None:
    """Worker processes (started from 64 files to parse) give the serial run's output byte
    for byte: on the bench's tree, whose chains cross modules (a helper's summary made in
    one worker, its caller's in another), and on five copies of the labelled corpus."""
    from tests.test_lint_peers import _bench  # loads bench/lint_bench.py
    _bench().generate_tree(tmp_path / "gen", 120)
    corpus = ROOT / "tests" / "lint_corpus"
    for n in range(5):
        shutil.copytree(corpus, tmp_path / "corpus" / f"copy{n}")
    for where, args in (("gen", ()),
                        ("corpus", ("--config", str(corpus / "pyproject.toml")))):
        runs = [lint(tmp_path / where, "--no-cache", "--jobs", jobs, "--format", "json",
                     "--min-confidence", "low", *args, ".") for jobs in ("1", "2")]
        assert runs[0].returncode == runs[1].returncode == 1, runs[1].stderr
        assert runs[0].stdout == runs[1].stdout
        assert len(json.loads(runs[0].stdout)) > 100


def test_pre_commit_hook_definition_runs_the_lint(tmp_path: Path) -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert isinstance(hooks, list)
    hook = next(h for h in hooks if h["id"] == "corevo-obs-lint-files")  # per-file mode
    assert hook["language"] == "python" and hook["types"] == ["python"]
    tree(tmp_path, **{"app.py": BLOCKING})
    entry = hook["entry"].split()
    assert entry[:2] == ["corevo-obs", "lint"]
    proc = subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", *entry[1:],
                           *hook.get("args", []), "app.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "COB104" in proc.stdout
    whole = next(h for h in hooks if h["id"] == "corevo-obs-lint")  # the default hook
    assert whole["entry"] == "corevo-obs lint --staged --min-confidence high"
    assert whole["pass_filenames"] is False
    chains = next(h for h in hooks if h["id"] == "corevo-obs-lint-chains")
    assert chains["entry"] == "corevo-obs lint --staged" and chains["pass_filenames"] is False


def test_the_project_passes_its_own_lint() -> None:
    proc = lint(ROOT, "corevo_obs")
    assert proc.returncode == 0, proc.stdout


def test_a_sync_chain_3000_deep_is_followed_without_recursion(tmp_path: Path) -> None:
    """Chain propagation is iterative: depth costs no Python stack, so a generated chain
    g0 -> ... -> g3000 -> time.sleep is found, and the other files' findings are kept."""
    depth = 3000
    hops = "".join(f"def g{i}():\n    g{i + 1}()\n\n" for i in range(depth))
    last = f"def g{depth}():\n    time.sleep(1)\n\n"
    deep = f"import time\n\n{hops}{last}async def main():\n    g0()\n"
    tree(tmp_path, **{"deep.py": deep, "app.py": BLOCKING})
    for run in ("cold", "warm"):
        proc = lint(tmp_path, ".", "--format", "json")
        assert proc.returncode == 1, (run, proc.stderr[-500:])
        found = {(f["path"], f["code"]): f for f in json.loads(proc.stdout)}
        assert ("app.py", "COB104") in found, run
        chain = found["deep.py", "COB110"]["message"]
        assert chain.endswith(f"g{depth - 1} -> g{depth} -> time.sleep()"), (run, chain[-80:])


# a direct call (high), a chain through a helper (medium), a first-use loader behind a
# helper (low): one of each confidence
GRADED = ("import importlib\nimport time\n\n"
          "def helper():\n    time.sleep(1)\n\n"
          "def loader(name):\n    return importlib.import_module(name)\n\n"
          "async def direct():\n    time.sleep(1)\n\n"
          "async def chained():\n    helper()\n\n"
          "async def first_use():\n    loader('x')\n")


def test_every_finding_has_a_confidence_in_each_format(tmp_path: Path) -> None:
    tree(tmp_path, **{"app.py": GRADED})
    rows = json.loads(lint(tmp_path, ".", "--format", "json", "--min-confidence", "low").stdout)
    assert {(r["line"], r["code"], r["confidence"]) for r in rows} == {
        (11, "COB104", "high"), (14, "COB110", "medium"), (17, "COB110", "low")}
    assert [r["via"] for r in rows if r["line"] == 14] == [["app.py"]]
    text = lint(tmp_path, ".", "--min-confidence", "low").stdout.splitlines()
    assert [line.rsplit(" ", 1)[1] for line in text] == ["[high]", "[medium]", "[low]"]
    default = lint(tmp_path, ".").stdout.splitlines()  # medium and up unless asked
    assert [line.rsplit(" ", 1)[1] for line in default] == ["[high]", "[medium]"]
    sarif = json.loads(lint(tmp_path, ".", "--format", "sarif", "--min-confidence",
                            "low").stdout)
    jsonschema.validate(sarif, json.loads(SARIF_SCHEMA.read_text()))
    results = sarif["runs"][0]["results"]
    assert [(r["properties"]["confidence"], r["rank"]) for r in results] == [
        ("high", 90.0), ("medium", 60.0), ("low", 30.0)]


@pytest.mark.parametrize(("flag", "lines"), [("low", {11, 14, 17}), ("medium", {11, 14}),
                                             ("high", {11})])
def test_min_confidence_flag_and_config_key(tmp_path: Path, flag: str, lines: set[int]) -> None:
    tree(tmp_path, **{"app.py": GRADED})
    rows = json.loads(lint(tmp_path, ".", "--format", "json", "--min-confidence", flag).stdout)
    assert {r["line"] for r in rows} == lines
    (tmp_path / "pyproject.toml").write_text(
        f'[tool.corevo-obs.lint]\nmin-confidence = "{flag}"\n')
    rows = json.loads(lint(tmp_path, ".", "--format", "json").stdout)
    assert {r["line"] for r in rows} == lines


def test_select_ignore_and_exit_zero_flags(tmp_path: Path) -> None:
    tree(tmp_path, **{"app.py": GRADED})
    (tmp_path / "pyproject.toml").write_text('[tool.corevo-obs.lint]\nignore = ["COB110"]\n')
    assert {r["code"] for r in json.loads(lint(tmp_path, ".", "--format", "json").stdout)} \
        == {"COB104"}
    proc = lint(tmp_path, ".", "--format", "json", "--select", "COB11", "--ignore", "COB104")
    assert {r["code"] for r in json.loads(proc.stdout)} == {"COB110"}  # the flags win
    proc = lint(tmp_path, ".", "--select", "COB104,COB110", "--ignore", "COB110")
    assert proc.returncode == 1 and proc.stdout.count("COB104") == 1
    proc = lint(tmp_path, ".", "--exit-zero")
    assert proc.returncode == 0 and "COB104" in proc.stdout


def test_stdin_source_is_linted_under_the_given_name(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "lint", "-",
                           "--stdin-filename", "src/app/handler.py", "--format", "json",
                           "--min-confidence", "low"],
                          cwd=tmp_path, input=GRADED, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    rows = json.loads(proc.stdout)
    assert {(r["path"], r["line"]) for r in rows} == {
        ("src/app/handler.py", 11), ("src/app/handler.py", 14), ("src/app/handler.py", 17)}
    proc = subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "lint", "-"],
                          cwd=tmp_path, input=CLEAN, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout == ""


def test_github_format_annotates_each_finding(tmp_path: Path) -> None:
    tree(tmp_path, **{"pkg__app.py": BLOCKING})
    proc = lint(tmp_path, ".", "--format", "github")
    assert proc.returncode == 1
    assert proc.stdout == ("::error file=pkg/app.py,line=4,col=5,title=COB104::COB104 "
                           "time.sleep() sleeps the whole event loop in async def handler "
                           "[high]\n")


@pytest.mark.parametrize("argv", [
    ["--select", "COB9x"], ["--ignore", "COB1"], ["--min-confidence", "sure"],
    ["--format", "gitlab"], ["--stdin-filename", "x.py"], ["-", "app.py"]])
def test_bad_flag_values_exit_2_in_one_line(tmp_path: Path, argv: list[str]) -> None:
    tree(tmp_path, **{"app.py": BLOCKING})
    args = argv if "-" in argv else [*argv, "app.py"]
    proc = lint(tmp_path, *args)
    assert proc.returncode == 2, proc
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("corevo-obs: error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout == ""


def test_a_package_under_src_with_no_configuration(tmp_path: Path) -> None:
    """ruff's default ``src = [".", "src"]``: ``src/pkg`` is ``pkg``, linted from the
    project directory or from its parent (the project named on the command line)."""
    proj = tmp_path / "proj"
    tree(proj, **{"src/pkg/__init__.py": "",
                  "src/pkg/helpers.py": "import time\n\ndef slow():\n    time.sleep(1)\n",
                  "src/pkg/app.py": "from pkg.helpers import slow\n\nasync def h():\n"
                                      "    slow()\n"})
    for cwd, where in ((proj, "."), (tmp_path, "proj")):
        rows = json.loads(lint(cwd, "--format", "json", "--no-cache", where).stdout)
        assert [(Path(r["path"]).name, r["code"]) for r in rows] == [("app.py", "COB110")]


def test_a_project_named_from_a_workspace_keeps_its_import_names(tmp_path: Path) -> None:
    """A flat-layout project (``proj/pkg``, a pyproject.toml with no lint table) linted from
    a workspace directory above it: the project, not the workspace, is the import root, so
    ``from pkg.helpers import slow`` resolves as it does from inside the project."""
    proj = tmp_path / "ws" / "proj"
    tree(proj, **{"pyproject.toml": "[project]\nname = 'p'\n",
                  "pkg/helpers.py": "import time\n\ndef slow():\n    time.sleep(1)\n",
                  "pkg/app.py": "from pkg.helpers import slow\n\nasync def h():\n"
                                "    slow()\n"})
    (proj / "pkg" / "__init__.py").write_text("")
    for cwd, where in ((proj, "."), (tmp_path / "ws", "proj"), (tmp_path, "ws/proj/pkg")):
        rows = json.loads(lint(cwd, "--format", "json", "--no-cache", where).stdout)
        assert [(Path(r["path"]).name, r["code"]) for r in rows] == [("app.py", "COB110")]


def test_namespace_packages_and_configured_src_roots(tmp_path: Path) -> None:
    """``src/nsp`` has no ``__init__.py`` (PEP 420) and ``plugins/`` is only on sys.path at
    run time: both chains resolve once the roots are known (src is a default root,
    plugins/ is named in ``src``)."""
    tree(tmp_path, **{
        "src__nsp__helpers__io.py": "import time\n\ndef slow():\n    time.sleep(1)\n",
        "src__nsp__app.py": "from nsp.helpers.io import slow\n\nasync def h():\n    slow()\n",
        "plugins__ext__tools.py": "import time\n\ndef block():\n    time.sleep(1)\n",
        "plugins__run.py": "from ext.tools import block\n\nasync def g():\n    block()\n"})
    found = {(r["path"], r["code"]) for r in json.loads(lint(tmp_path, ".", "--format",
                                                              "json").stdout)}
    assert found == {("src/nsp/app.py", "COB110")}
    (tmp_path / "pyproject.toml").write_text(
        '[tool.corevo-obs.lint]\nsrc = ["src", "plugins"]\n')
    found = {(r["path"], r["code"]) for r in json.loads(lint(tmp_path, ".", "--format",
                                                              "json").stdout)}
    assert found == {("src/nsp/app.py", "COB110"), ("plugins/run.py", "COB110")}
