"""The hooks in .pre-commit-hooks.yaml, run by the real pre-commit (`pre-commit try-repo`).

pre-commit builds each hook's environment from this repository with pip, as a user's
`pre-commit install` would, so this also proves the package installs as a hook.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
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
    assert text.count("entry: corevo-obs ") == 4
    # the default hook sees the whole project and blocks a commit only on the high tier
    assert "entry: corevo-obs lint --staged --min-confidence high" in text
    assert "entry: corevo-obs lint --staged\n" in text  # the chains hook
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


HANDLER = "from helpers import load\n\n\nasync def handler():\n    load()\n"
HELPER = "def load():\n    return 1\n"


def install_hook(p: Project) -> None:
    """A real git pre-commit hook running the shipped hook's entry (``lint --staged``)."""
    hook = p.root / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\nexec {sys.executable} -m corevo_obs.cli.main lint --staged\n")
    hook.chmod(0o755)


def commit(p: Project, message: str) -> subprocess.CompletedProcess[str]:
    p.git("add", "-A")
    return subprocess.run(["git", "commit", "-q", "-m", message], cwd=p.root, env=p.env,
                          capture_output=True, text=True, timeout=300)


def test_staged_hook_fails_a_commit_that_only_edits_the_helper(tmp_path: Path) -> None:
    """The handler is not staged; the helper it calls is, and now sleeps: the chain runs
    through a staged file, so the commit fails. A legacy finding whose chain touches
    nothing staged does not block an unrelated commit."""
    p = Project(tmp_path)
    p.write("handler.py", HANDLER)
    p.write("helpers.py", HELPER)
    p.write("legacy.py", BLOCKING)
    p.write("notes.py", "X = 1\n")
    p.git("init", "-q", "-b", "main")
    p.write(".gitignore", ".corevo-cache/\n")
    p.commit("start")
    install_hook(p)
    p.append("notes.py", "Y = 2\n")
    unrelated = commit(p, "notes only")
    assert unrelated.returncode == 0, unrelated.stdout + unrelated.stderr
    p.write("helpers.py", "import time\n\n\ndef load():\n    time.sleep(1)\n    return 1\n")
    failed = commit(p, "helper sleeps")
    out = failed.stdout + failed.stderr  # git shows a hook's output on its stderr
    assert failed.returncode != 0
    assert "handler.py:5:5: COB110 load() blocks inside async def handler: " \
           "handler -> load -> time.sleep()" in out, out
    assert "legacy.py" not in out
    assert p.git("status", "--porcelain").strip() == "M  helpers.py"  # not committed


def test_staged_run_on_an_unchanged_tree_is_under_a_second(tmp_path: Path) -> None:
    """The hook lints the whole project on every commit: the cache makes that cheap."""
    p = Project(tmp_path)
    for i in range(200):
        p.write(f"pkg/m{i}.py", HANDLER.replace("helpers", f"pkg.h{i}"))
        p.write(f"pkg/h{i}.py", HELPER)
    p.write("pkg/__init__.py", "")
    p.git("init", "-q", "-b", "main")
    p.commit("start")
    p.append("pkg/h0.py", "Z = 0\n")
    p.git("add", "pkg/h0.py")
    cold = p.run("lint", "--staged")
    assert cold.returncode == 0, cold.stdout + cold.stderr
    times = []
    for _ in range(3):
        start = time.perf_counter()
        warm = p.run("lint", "--staged")
        times.append(time.perf_counter() - start)
        assert warm.returncode == 0 and "none changed (cache)" in warm.stderr, warm.stderr
    print(f"unchanged 401-file tree, lint --staged: best {min(times):.2f} s")
    assert min(times) < 1.5, times  # a whole process, start-up included (< 1 s unloaded)


def test_staged_outside_a_git_repository_is_one_line(tmp_path: Path) -> None:
    p = Project(tmp_path)
    p.write("app.py", BLOCKING)
    proc = p.run("lint", "--staged")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("corevo-obs: error:"), \
        proc.stderr
