"""Every code block of README.md and docs/*.md runs as a reader would run it: Python blocks
as plain scripts (``python file.py``: no REPL mode, no hidden imports) and shell commands in
bash, page by page in a fresh directory, against the package installed non-editable in a
venv (``pip install .``), never this checkout (tests/helpers/doc_pages.py says how a block
states what it needs; tests/helpers/doc_commands.py what is checked instead of run)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.doc_commands import Tally, run_block
from tests.helpers.doc_pages import ROOT, Block, all_pages

pytestmark = pytest.mark.system
PAGES = all_pages()
PROJECT = Path(__file__).parent / "data" / "docs_project"


def _clean_env() -> dict[str, str]:
    """This environment minus what would point Python at the checkout or another venv."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PROMETHEUS_MULTIPROC_DIR", "COREVO_WORKER", "PYTHONPATH",
                         "PYTEST_ADDOPTS", "VIRTUAL_ENV")}


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv that sees this interpreter's packages, with corevo-obs installed from a
    wheel-like build of the checkout (``pip install .``) over the editable one; with
    $COREVO_DOCS_INSTALLED=1, this interpreter's own venv, where CI already did that."""
    if os.environ.get("COREVO_DOCS_INSTALLED") == "1":
        return _checked(Path(sys.prefix))
    venv = tmp_path_factory.mktemp("docs-venv")
    # no pip of its own (ensurepip brings an old setuptools): this interpreter's pip and
    # build backend, through the system site-packages
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip",
                    str(venv)], check=True)
    py = venv / "bin" / "python"
    built = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps",
                            "--no-build-isolation", "--root-user-action=ignore",
                            "--disable-pip-version-check", str(ROOT)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    # the tools the docs name (gunicorn, uvicorn, ...) run under the venv's interpreter
    scripts = Path(sysconfig.get_path("scripts"))
    for tool in ("gunicorn", "uvicorn", "lint-imports", "pytest"):
        found = scripts / tool
        if found.exists() and not (venv / "bin" / tool).exists():
            (venv / "bin" / tool).write_text(f'#!/bin/sh\nexec "{py}" "{found}" "$@"\n')
            (venv / "bin" / tool).chmod(0o755)
    return _checked(venv)


def _checked(venv: Path) -> Path:
    """The venv, once its ``corevo_obs`` is shown to come from outside the checkout."""
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import corevo_obs; print(corevo_obs.__file__)"],
                           capture_output=True, text=True, check=True, cwd=venv,
                           env=_clean_env()).stdout
    assert not Path(where.strip()).resolve().is_relative_to(ROOT), where
    return venv


@pytest.fixture
def page_env(installed: Path, tmp_path: Path) -> Iterator[dict[str, str]]:
    env = _clean_env()
    env["PATH"] = f"{installed / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(installed)
    env["HOME"] = str(tmp_path / "home")
    yield env


def _checkout_copy(dest: Path) -> Path:
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(
        ".git", "__pycache__", "*.egg-info", ".mypy_cache", ".pytest_cache", ".ruff_cache",
        "build", "downloads", ".venv"))
    return dest


def _run_python(block: Block, cwd: Path, env: dict[str, str]) -> None:
    name = block.file or "snippet.py"
    (cwd / name).parent.mkdir(parents=True, exist_ok=True)
    (cwd / name).write_text(block.source, encoding="utf-8")
    flakes = subprocess.run([sys.executable, "-m", "pyflakes", name], cwd=cwd,
                            capture_output=True, text=True, timeout=60)
    assert "undefined name" not in flakes.stdout, f"{block.where}:\n{flakes.stdout}"
    runner = (["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", name]
              if Path(name).name.startswith("test_") else
              ["python", "-W", "error::DeprecationWarning:__main__", name])
    done = subprocess.run(runner, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120)
    said = f"{block.where} ({' '.join(runner)})\n{block.source}\n--- out:\n{done.stdout[-3000:]}" \
           f"\n--- err:\n{done.stderr[-3000:]}"
    assert done.returncode == 0, said
    assert "Warning" not in done.stderr, said  # a block a user pastes must not warn either


@pytest.mark.parametrize("page", sorted(PAGES))
def test_page_runs_as_written(page: str, page_env: dict[str, str], tmp_path: Path,
                              request: pytest.FixtureRequest,
                              capsys: pytest.CaptureFixture[str]) -> None:
    here = tmp_path / "reader"
    shutil.copytree(PROJECT, here)
    for git in (["init", "-q"], ["add", "-A"],
                ["-c", "user.name=reader", "-c", "user.email=reader@example.invalid",
                 "commit", "-qm", "a reader's project"]):
        subprocess.run(["git", *git], cwd=here, check=True, capture_output=True)
    subprocess.run(["python", "deploy.py"], cwd=here, env=page_env, check=True, timeout=60)
    checkout: Path | None = None
    tally = Tally()
    blocks = [b for b in PAGES[page] if not b.not_run]
    if not blocks:
        pytest.skip(f"{page}: every block is not-run")
    redis_url = None
    if any("redis" in b.needs or "redis://" in b.source for b in blocks):
        redis_url = request.getfixturevalue("redis_url")
    for block in blocks:
        env = dict(page_env)
        if redis_url:
            env["REDIS_URL"] = redis_url
        if "postgres" in block.needs or "$DATABASE_URL" in block.source:
            env["DATABASE_URL"] = request.getfixturevalue("pg_dsn")
        if "multiproc-dir" in block.needs:
            metrics = tmp_path / f"metrics-{block.line}"
            metrics.mkdir()
            env["PROMETHEUS_MULTIPROC_DIR"] = str(metrics)
        cwd = here
        if block.from_checkout:
            checkout = checkout or _checkout_copy(tmp_path / "checkout")
            cwd = checkout
        if block.lang == "python":
            _run_python(block, cwd, env)
            tally.run.append(f"python {block.file or 'snippet.py'}")
        elif os.environ.get("COREVO_DOCS_PYTHON_ONLY") == "1":  # the other Pythons (CI)
            tally.checked.append((block.where, "$COREVO_DOCS_PYTHON_ONLY=1"))
        else:
            run_block(block.source, block.where, cwd, env, tally, redis_url)
    skipped = [b.where for b in PAGES[page] if b.not_run]
    with capsys.disabled():
        print(f"\n[docs] {page}: {len(tally.run)} run, {len(tally.checked)} checked "
              f"without running, {len(skipped)} not run")


def test_blocks_say_what_they_need() -> None:
    blocks = [b for bs in PAGES.values() for b in bs]
    assert len(blocks) >= 60
    not_run = [f"{b.where} ({b.not_run})" for b in blocks if b.not_run]
    assert len(not_run) <= 4, f"too many docs blocks that never run: {not_run}"
    for b in blocks:
        if b.lang != "python":
            continue
        try:
            compile(b.source, b.where, "exec")
        except SyntaxError as exc:
            assert b.not_run, f"{b.where}: not a script a reader can run: {exc}"
