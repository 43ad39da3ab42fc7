"""Code for a newer Python than the one running the lint: parsed by the newest installed
interpreter and analysed, not a COB900 that flips the exit code; a file no Python parses
is still COB900, naming the Pythons that rejected it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from corevo_obs.tooling.lint.newer import newer_pythons

MODERN = '''import time

type Alias = list[int]


def helper[T](x: T) -> T:
    time.sleep(1)
    return x


class Box[T]:
    async def get(self) -> None:
        time.sleep(1)


async def main() -> None:
    helper(1)
'''

needs_newer = pytest.mark.skipif(
    sys.version_info >= (3, 12) or not newer_pythons(),
    reason="the running Python parses PEP 695 itself, or no newer Python is installed")


def lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "lint", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=120)


@needs_newer
def test_pep695_file_is_analysed_through_the_newer_python(tmp_path: Path) -> None:
    (tmp_path / "modern.py").write_text(MODERN)
    proc = lint(tmp_path, ".")
    assert proc.returncode == 1, proc.stdout + proc.stderr  # findings, not "unparsable"
    assert "COB900" not in proc.stdout
    assert "modern.py:13:9: COB104" in proc.stdout
    assert "modern.py:17:5: COB110" in proc.stdout and "main -> helper -> time.sleep()" \
        in proc.stdout


@needs_newer
def test_a_file_no_python_parses_names_both(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("async def f(:\n")
    proc = lint(tmp_path, ".")
    assert proc.returncode == 2
    (major, minor), _ = newer_pythons()[0]
    here = "Python {}.{}".format(*sys.version_info[:2])
    assert f"({here}; Python {major}.{minor} rejects it too" in proc.stdout


def test_interpreters_found_are_newer_and_run() -> None:
    for version, exe in newer_pythons():
        assert version > sys.version_info[:2]
        assert Path(exe).is_file()
