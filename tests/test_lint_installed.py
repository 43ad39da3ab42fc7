"""Chains into installed packages (``--follow-installed``, ``--installed DIR``, config
``installed``): a dependency's sync code that blocks is a chain from the project's
coroutine; the dependency's own findings are not reported, and the project's own package
is never read from an installed copy of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from corevo_obs.tooling.lint import LintConfig, lint_paths

VENDOR_CLIENT = '''import socket


class Client:
    def connect(self, host: str) -> None:
        self.sock = socket.create_connection((host, 1883))

    def describe(self) -> str:
        return "client"


async def own_coroutine() -> None:
    socket.getfqdn()  # a finding of the dependency, not of the project
'''
APP = '''from vendorlib.client import Client

from app.store import save


async def start(host: str) -> None:
    client = Client()
    client.connect(host)
    client.describe()


async def persist() -> None:
    save()
'''
STORE = '''def save() -> None:
    pass
'''
# an installed copy of the project's own package: never read in place of the tree's
INSTALLED_STORE = '''def save() -> None:
    open("/tmp/installed-copy").close()
'''


def layout(tmp_path: Path) -> tuple[Path, Path]:
    project, site = tmp_path / "project", tmp_path / "site"
    for path, text in {project / "app" / "__init__.py": "",
                       project / "app" / "main.py": APP,
                       project / "app" / "store.py": STORE,
                       site / "vendorlib" / "__init__.py": "",
                       site / "vendorlib" / "client.py": VENDOR_CLIENT,
                       site / "app" / "__init__.py": "",
                       site / "app" / "store.py": INSTALLED_STORE}.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return project, site


def test_without_installed_the_dependency_is_opaque(tmp_path: Path) -> None:
    project, _ = layout(tmp_path)
    config = LintConfig(root=str(project))
    assert lint_paths([str(project)], config, jobs=1).findings == []


def test_a_chain_enters_an_installed_package(tmp_path: Path) -> None:
    project, site = layout(tmp_path)
    config = LintConfig(root=str(project), installed=(str(site),))
    result = lint_paths([str(project)], config, jobs=1)
    assert [(Path(f.path).name, f.line, f.code) for f in result.findings] == [
        ("main.py", 8, "COB110")]
    assert "Client.connect -> socket.create_connection()" in result.findings[0].message
    assert not result.errors


def test_the_cli_flag_and_a_missing_directory(tmp_path: Path) -> None:
    project, site = layout(tmp_path)

    def lint(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "lint",
                               "--no-cache", *args, "."], cwd=project,
                              capture_output=True, text=True, timeout=120)

    found = lint("--installed", str(site))
    assert found.returncode == 1, found.stderr
    assert "main.py:8:" in found.stdout and "socket.create_connection()" in found.stdout
    missing = lint("--installed", str(tmp_path / "nowhere"))
    assert missing.returncode == 2
    assert "installed: not a directory" in missing.stderr
    assert "Traceback" not in missing.stderr


def test_pyproject_key_and_cache(tmp_path: Path) -> None:
    project, site = layout(tmp_path)
    (project / "pyproject.toml").write_text(
        f'[tool.corevo-obs.lint]\ninstalled = ["{site.as_posix()}"]\n')

    def lint() -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "lint", "."],
                              cwd=project, capture_output=True, text=True, timeout=120)

    first, second = lint(), lint()  # the second from the cache: the same answer
    assert first.returncode == second.returncode == 1, first.stderr
    assert first.stdout == second.stdout
    assert "socket.create_connection()" in first.stdout
