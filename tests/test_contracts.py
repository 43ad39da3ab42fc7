"""The shrink-only layer contract, driven through both CLIs on a real sample project + git."""

from __future__ import annotations

import configparser
import os
import pkgutil
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from corevo_obs.tooling.importcontract.debt import DebtEntry, DebtFileError, parse_debt

pytest.importorskip("importlinter")

ROOT = Path(__file__).parent.parent

CONFIG = """\
[importlinter]
root_package = app
contract_types =
    shrink_only_layers: corevo_obs.tooling.importcontract.contract.ShrinkOnlyLayersContract

[importlinter:contract:layers]
name = Layers
type = shrink_only_layers
control_plane = app.platform
contracts = app.contracts
kernel = app.runtime
debt_file = lint_rules/import-debt.txt
"""

FILES = {
    "app/__init__.py": "",
    "app/platform/__init__.py": "",
    "app/platform/api.py": "from app.contracts import models\n",
    "app/contracts/__init__.py": "",
    "app/contracts/models.py": "X = 1\n",
    "app/runtime/__init__.py": "",
    "app/runtime/worker.py": (
        "import os\n\nfrom app.platform import api\nfrom app.contracts import models\n"
    ),
    "app/runtime/jobs.py": "from app.platform.api import models\nimport app.platform.api\n",
    ".importlinter": CONFIG,
}


def _lint_imports() -> list[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    return [str(exe)] if exe.exists() else [shutil.which("lint-imports") or "lint-imports"]


class Project:
    """A temp project with a git repo; runs the real commands in subprocesses."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {k: v for k, v in os.environ.items() if k != "COREVO_DEBT_BASE"}
        self.env.update(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
                        GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")

    def write(self, rel: str, text: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def append(self, rel: str, text: str) -> None:
        self.write(rel, (self.root / rel).read_text(encoding="utf-8") + text)

    def git(self, *args: str) -> str:
        return subprocess.run(["git", *args], cwd=self.root, env=self.env, check=True,
                              capture_output=True, text=True).stdout

    def commit(self, message: str) -> None:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", *args],
                              cwd=self.root, env=self.env, capture_output=True, text=True,
                              timeout=120)

    def lint_imports(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*_lint_imports(), "--no-cache", "--no-logo"], cwd=self.root,
                              env={**self.env, "COLUMNS": "200"}, capture_output=True,
                              text=True, timeout=120)

    @property
    def debt(self) -> str:
        return (self.root / "lint_rules/import-debt.txt").read_text(encoding="utf-8")


def recorded_project(root: Path) -> Project:
    """Sample project on main with its debt recorded and committed (two commits)."""
    p = Project(root)
    for rel, text in FILES.items():
        p.write(rel, text)
    p.git("init", "-q", "-b", "main")
    p.commit("code")
    assert p.run("debt", "init").returncode == 0
    p.commit("record import debt")
    return p


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return recorded_project(tmp_path)


def _assert_clean_failure(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode != 0
    assert "Traceback" not in result.stdout + result.stderr


def test_init_writes_sorted_entries_with_line_numbers(project: Project) -> None:
    entries = [ln for ln in project.debt.splitlines() if not ln.startswith("#")]
    assert entries == [
        "app.runtime.jobs -> app.platform.api  # line 1, 2",
        "app.runtime.worker -> app.platform.api  # line 3",
    ]
    again = project.run("debt", "init")
    assert again.returncode == 2 and "--force" in again.stderr


def test_recorded_debt_passes_both_entry_points(project: Project) -> None:
    result = project.run("debt", "check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "KEPT: paid off 0, remaining 2, new 0" in result.stdout
    lint = project.lint_imports()
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "Layers KEPT" in lint.stdout


@pytest.mark.parametrize(
    ("rel", "line", "message"),
    [
        ("app/platform/api.py", "\nfrom app.runtime import worker\n",
         "app.platform.api -> app.runtime.worker (line 3): "
         "the control plane may not import the kernel"),
        ("app/runtime/jobs.py", "import app.platform\n",
         "app.runtime.jobs -> app.platform (line 3): the kernel may not import the control plane"),
        ("app/contracts/models.py", "import app.platform\n",
         "app.contracts.models -> app.platform (line 2): "
         "the contracts may not import the control plane"),
        ("app/contracts/models.py", "from app.runtime import jobs\n",
         "app.contracts.models -> app.runtime.jobs (line 2): "
         "the contracts may not import the kernel"),
    ],
    ids=["control-plane->kernel", "kernel->control-plane", "contracts->control-plane",
         "contracts->kernel"],
)
def test_new_violation_fails_naming_importer_imported_and_line(
    project: Project, rel: str, line: str, message: str
) -> None:
    project.append(rel, line)
    result = project.run("debt", "check")
    assert result.returncode == 1
    assert "new 1" in result.stdout
    assert f"new forbidden import {message}" in result.stdout
    lint = project.lint_imports()
    assert lint.returncode == 1
    assert message in lint.stdout


def test_stale_entry_fails_until_deleted(project: Project) -> None:
    project.write("app/runtime/jobs.py", "from app.contracts import models\n")
    result = project.run("debt", "check")
    assert result.returncode == 1
    assert "stale debt entry app.runtime.jobs -> app.platform.api" in result.stdout
    assert project.lint_imports().returncode == 1
    project.write("lint_rules/import-debt.txt", project.debt.replace(
        "app.runtime.jobs -> app.platform.api  # line 1, 2\n", ""))
    result = project.run("debt", "check")
    assert result.returncode == 0, result.stdout
    assert "paid off 1, remaining 1" in result.stdout


def test_swapping_one_debt_for_another_fails_against_the_base(project: Project) -> None:
    project.git("switch", "-q", "-c", "feature")
    project.write("app/runtime/jobs.py", "from app.contracts import models\n")
    project.append("app/runtime/worker.py", "import app.platform\n")
    swapped = project.debt.replace(
        "app.runtime.jobs -> app.platform.api  # line 1, 2\n",
        "app.runtime.worker -> app.platform  # line 5\n")
    project.write("lint_rules/import-debt.txt", swapped)
    project.commit("swap a debt")
    result = project.run("debt", "check")
    assert result.returncode == 1
    assert "debt entry app.runtime.worker -> app.platform was added since the base" in (
        result.stdout)
    assert "merge base with main" in result.stdout
    assert "paid off 1" in result.stdout and "new 0" in result.stdout
    assert project.run("debt", "check", "--base", "main").returncode == 1
    assert project.run("debt", "check", "--base", "HEAD").returncode == 0
    lint = project.lint_imports()
    assert lint.returncode == 1 and "was added since the base" in lint.stdout


def test_uncommitted_growth_on_main_fails(project: Project) -> None:
    project.append("app/runtime/worker.py", "import app.platform\n")
    project.append("lint_rules/import-debt.txt", "app.runtime.worker -> app.platform\n")
    result = project.run("debt", "check")
    assert result.returncode == 1
    assert "added 1" in result.stdout and "uncommitted" in result.stdout


def test_clean_shrink_on_a_branch_passes(project: Project) -> None:
    project.git("switch", "-q", "-c", "fix")
    project.write("app/runtime/jobs.py", "from app.contracts import models\n")
    project.write("lint_rules/import-debt.txt", project.debt.replace(
        "app.runtime.jobs -> app.platform.api  # line 1, 2\n", ""))
    project.commit("pay a debt")
    result = project.run("debt", "check")
    assert result.returncode == 0, result.stdout
    assert "paid off 1, remaining 1, new 0, stale 0, added 0" in result.stdout
    assert "paid off: app.runtime.jobs -> app.platform.api" in result.stdout
    assert project.lint_imports().returncode == 0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("app.runtime.* -> app.platform.api\n", "import-debt.txt:1: wildcard in debt entry"),
        ("# ok\napp.runtime.jobs app.platform.api\n", "import-debt.txt:2: not a debt entry"),
    ],
)
def test_malformed_debt_file_is_one_clear_line(project: Project, text: str, message: str) -> None:
    project.write("lint_rules/import-debt.txt", text)
    result = project.run("debt", "check")
    _assert_clean_failure(result)
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.splitlines()) == 1
    lint = project.lint_imports()
    _assert_clean_failure(lint)
    assert message in lint.stdout


def test_missing_debt_file_and_bad_config_are_clear_errors(project: Project) -> None:
    (project.root / "lint_rules/import-debt.txt").unlink()
    result = project.run("debt", "check")
    _assert_clean_failure(result)
    assert "debt file not found" in result.stderr
    _assert_clean_failure(project.lint_imports())
    project.write(".importlinter", CONFIG.replace("kernel = app.runtime\n", "kernal = x\n"))
    result = project.run("debt", "check")
    _assert_clean_failure(result)
    assert "kernel: This is a required field" in result.stderr
    result = project.run("debt", "check", "--config", "nope.ini")
    _assert_clean_failure(result)
    assert "nope.ini" in result.stderr


def test_bad_base_is_an_error_and_no_base_is_a_note(project: Project) -> None:
    result = project.run("debt", "check", "--base", "no-such-rev")
    _assert_clean_failure(result)
    assert "no-such-rev" in result.stderr
    shutil.rmtree(project.root / ".git")
    result = project.run("debt", "check")
    assert result.returncode == 0, result.stderr
    assert "not a git work tree: ratchet skipped" in result.stdout


def test_parse_debt_rejects_duplicates_and_keeps_exact_names() -> None:
    assert parse_debt("a.b -> c.d  # line 3\n\n", source="f") == {DebtEntry("a.b", "c.d")}
    with pytest.raises(DebtFileError, match="f:2: duplicate"):
        parse_debt("a.b -> c.d\na.b->c.d\n", source="f")


def test_template_works_from_pyproject(project: Project) -> None:
    template = Path(__file__).parent.parent / "lint_rules/import-contract.template.toml"
    text = template.read_text(encoding="utf-8").replace("myapp.", "app.").replace(
        '"myapp"', '"app"')
    (project.root / ".importlinter").unlink()
    project.write("pyproject.toml", text)
    result = project.run("debt", "check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "remaining 2, new 0" in result.stdout
    assert project.lint_imports().returncode == 0
    project.append("app/platform/api.py", "import app.runtime.jobs\n")
    assert "app.platform.api -> app.runtime.jobs (line 2)" in project.lint_imports().stdout


def test_unknown_layer_module_is_an_error_unless_allowed(project: Project) -> None:
    project.write(".importlinter", CONFIG.replace("kernel = app.runtime", "kernel = app.runtim"))
    for args in (("debt", "check"), ("debt", "init", "--force")):
        result = project.run(*args)
        _assert_clean_failure(result)
        assert "layer module(s) not found: app.runtim" in result.stderr
    project.append(".importlinter", "missing_modules = warn\n")
    result = project.run("debt", "check")
    assert result.returncode == 1  # the kernel is gone, so both debt entries are stale
    assert "note: layer module app.runtim not found: skipped" in result.stdout


def test_shallow_clone_skips_the_ratchet_with_a_note(
    project: Project, tmp_path_factory: pytest.TempPathFactory
) -> None:
    clone = Project(tmp_path_factory.mktemp("clone"))
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{project.root}",
                    str(clone.root)], check=True, env=project.env)
    result = clone.run("debt", "check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "HEAD has no parent" in result.stdout and "ratchet skipped" in result.stdout


def test_pre_commit_hook_runs_the_check_from_the_project_root(project: Project) -> None:
    """The hook as pre-commit runs it: its entry and args, no file names, from the root."""
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    hook = next(h for h in hooks if h["id"] == "corevo-obs-debt")
    assert hook["language"] == "python" and hook["pass_filenames"] is False
    assert hook["always_run"] is True  # a commit touching only the debt file is checked too
    assert any(d.startswith("import-linter") for d in hook["additional_dependencies"])
    command: list[str] = [*hook["entry"].split(), *hook.get("args", [])]
    program, *args = command
    assert program == "corevo-obs"
    assert project.run(*args).returncode == 0
    project.append("lint_rules/import-debt.txt", "app.runtime.worker -> app.platform\n")
    result = project.run(*args)
    assert result.returncode == 1 and "stale debt entry app.runtime.worker" in result.stdout
    assert "added 1" in result.stdout


# -- the project's own contract (.importlinter), on a copy of the real package -------------

LAYERS = "Tooling / core / runtime instrumentation"
NO_APPS = "The library does not import its applications (cli, demo)"


def _own_config() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter", encoding="utf-8")
    return config


def test_every_package_of_the_library_has_a_place_in_the_own_contract() -> None:
    """A package added later must be put in a layer (or named an application) on purpose."""
    config = _own_config()
    layers = config["importlinter:contract:layers"]
    placed = [m for key in ("control_plane", "contracts", "kernel") for m in layers[key].split()]
    assert len(placed) == len(set(placed))
    apps = config["importlinter:contract:no-apps"]["forbidden_modules"].split()
    assert "missing_modules" not in layers  # default error: a renamed package cannot slip out
    children = {f"corevo_obs.{m.name}" for m in pkgutil.iter_modules([str(ROOT / "corevo_obs")])
                if not m.name.startswith("_")}
    assert set(placed) | set(apps) == children


@pytest.fixture(scope="module")
def own_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """corevo_obs, its .importlinter and debt file copied out of git (the ratchet is skipped)."""
    root = tmp_path_factory.mktemp("own")
    shutil.copytree(ROOT / "corevo_obs", root / "corevo_obs",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", root / ".importlinter")
    (root / "lint_rules").mkdir()
    shutil.copy(ROOT / "lint_rules/import-debt.txt", root / "lint_rules/import-debt.txt")
    return root


@pytest.mark.parametrize(
    ("rel", "text", "contract", "message"),
    [
        ("corevo_obs/tooling/lint/_probe.py", "from corevo_obs.stages import external\n", LAYERS,
         "corevo_obs.tooling.lint._probe -> corevo_obs.stages (line 1): "
         "the control plane may not import the kernel"),
        ("corevo_obs/leases/_probe.py", '"""Probe."""\n\nimport corevo_obs.tooling.lint.scan\n',
         LAYERS,
         "corevo_obs.leases._probe -> corevo_obs.tooling.lint.scan (line 3): "
         "the kernel may not import the control plane"),
        ("corevo_obs/_probe.py", "from corevo_obs.demo import main\n", NO_APPS,
         "corevo_obs._probe -> corevo_obs.demo.main (l.1)"),
    ],
    ids=["tooling->runtime", "runtime->tooling", "library->demo"],
)
def test_own_contract_catches_a_new_forbidden_import(
    own_copy: Path, rel: str, text: str, contract: str, message: str
) -> None:
    project = Project(own_copy)
    before = project.lint_imports()
    assert before.returncode == 0, before.stdout + before.stderr
    assert f"{contract} KEPT" in before.stdout
    probe = own_copy / rel
    probe.write_text(text, encoding="utf-8")
    try:
        after = project.lint_imports()
        assert after.returncode == 1
        assert f"{contract} BROKEN" in after.stdout
        assert message in after.stdout
        debt = project.run("debt", "check")  # runs the shrink-only layers contract only
        if contract == LAYERS:
            assert debt.returncode == 1 and f"new forbidden import {message}" in debt.stdout
        else:
            assert debt.returncode == 0, debt.stdout + debt.stderr
    finally:
        probe.unlink()
