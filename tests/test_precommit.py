"""The hooks in .pre-commit-hooks.yaml, run by the real pre-commit (`pre-commit try-repo`).

pre-commit builds each hook's environment from this repository with pip, as a user's
`pre-commit install` would, so this also proves the package installs as a hook.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_contracts import Project, recorded_project

ROOT = Path(__file__).parent.parent
BLOCKING = "import time\n\n\nasync def handler():\n    time.sleep(1)\n"
OFFLOADED = "import asyncio\nimport time\n\n\nasync def handler():\n" \
            "    await asyncio.to_thread(time.sleep, 1)\n"


@pytest.fixture(scope="module")
def pre_commit_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("pre-commit") is None and not Path(sys.executable).with_name(
            "pre-commit").exists():
        pytest.fail("pre-commit is in the dev extras but not installed")
    return tmp_path_factory.mktemp("pre-commit-home")


def try_repo(project: Project, hook: str, home: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("pre-commit")
    cmd = [str(exe) if exe.exists() else "pre-commit", "try-repo", str(ROOT), hook,
           "--all-files"]
    return subprocess.run(cmd, cwd=project.root, capture_output=True, text=True, timeout=600,
                          env={**project.env, "PRE_COMMIT_HOME": str(home),
                               "PIP_DISABLE_PIP_VERSION_CHECK": "1"})


def test_lint_hook_fails_a_commit_with_a_blocking_call(tmp_path: Path,
                                                       pre_commit_home: Path) -> None:
    p = Project(tmp_path)
    p.write("app.py", BLOCKING)
    p.git("init", "-q", "-b", "main")
    p.git("add", "app.py")
    failed = try_repo(p, "corevo-obs-lint", pre_commit_home)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "app.py:5:5: COB104" in failed.stdout
    p.write("app.py", OFFLOADED)
    p.git("add", "app.py")
    passed = try_repo(p, "corevo-obs-lint", pre_commit_home)
    assert passed.returncode == 0, passed.stdout + passed.stderr


def test_debt_hook_fails_a_new_forbidden_import(tmp_path: Path, pre_commit_home: Path) -> None:
    p = recorded_project(tmp_path)
    kept = try_repo(p, "corevo-obs-debt", pre_commit_home)
    assert kept.returncode == 0, kept.stdout + kept.stderr
    p.write("app/platform/jobs.py", "from app.runtime import worker\n")
    p.git("add", "-A")
    broken = try_repo(p, "corevo-obs-debt", pre_commit_home)
    assert broken.returncode != 0, broken.stdout
    assert "app.platform.jobs" in broken.stdout


def test_hook_entries_are_the_installed_console_script() -> None:
    """Guard the link the two tests above rely on: the hook runs our console script."""
    text = (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8")
    assert text.count("entry: corevo-obs ") == 2
    assert os.access(shutil.which("corevo-obs") or "", os.X_OK)


def _version() -> str:
    import tomllib

    with open(ROOT / "pyproject.toml", "rb") as f:
        return str(tomllib.load(f)["project"]["version"])


@pytest.mark.parametrize("page", ["lint.md", "contracts.md"])
def test_the_docs_config_snippet_is_valid_for_a_users_repository(page: str, tmp_path: Path,
                                                                 pre_commit_home: Path) -> None:
    """A user pastes the snippet: pre-commit accepts it, it names hooks this repository
    defines and the tag of this release (not a tag that never existed)."""
    import yaml

    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    (snippet,) = [b for b in text.split("```yaml\n")[1:] if b.startswith("repos:")]
    snippet = snippet.split("```", 1)[0]
    config = tmp_path / ".pre-commit-config.yaml"
    config.write_text(snippet, encoding="utf-8")
    exe = Path(sys.executable).with_name("pre-commit")
    done = subprocess.run([str(exe) if exe.exists() else "pre-commit", "validate-config",
                           str(config)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PRE_COMMIT_HOME": str(pre_commit_home)})
    assert done.returncode == 0, done.stdout + done.stderr
    (repo,) = yaml.safe_load(snippet)["repos"]
    assert repo["rev"] == "v" + _version()
    defined = {h["id"] for h in yaml.safe_load(
        (ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))}
    assert {h["id"] for h in repo["hooks"]} <= defined
