"""Every example runs: each ``>>>`` example in the library (none marked ``+SKIP``) and
each ```python block of README.md and docs/*.md. Examples that nothing runs drift into
examples that fail. A docstring example that cannot run here (a server, a real host
path) is written as a plain code block without ``>>>``; a docs block says what it needs
(below)."""

from __future__ import annotations

import doctest
import importlib
import os
import pkgutil
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

import corevo_obs

# modules whose import needs an optional backend or starts an application
SKIP_PREFIXES = ("corevo_obs.cli", "corevo_obs.demo", "corevo_obs.tooling.assets")


def _modules() -> list[str]:
    found = []
    for info in pkgutil.walk_packages(corevo_obs.__path__, "corevo_obs."):
        if not info.name.startswith(SKIP_PREFIXES):
            found.append(info.name)
    return sorted(found)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} failing example(s)"
    skipped = [f"{test.name}:{example.lineno}"
               for test in doctest.DocTestFinder().find(module, name)
               for example in test.examples if example.options.get(doctest.SKIP)]
    assert not skipped, f"{name}: examples that never run: {skipped}"


# --- the ```python blocks of README.md and docs/*.md ---------------------------------
# Each block runs as a reader would paste it: alone, in a fresh interpreter, in an empty
# directory, with DeprecationWarning an error; one with top-level ``await`` runs as in
# ``python -m asyncio``. An HTML comment on the line before the fence says what the block
# needs from the test environment, or why it does not run:
#   <!-- needs: redis -->          $REDIS_URL, a private redis-server
#   <!-- needs: postgres -->       $DATABASE_URL (a DSN), as in CI
#   <!-- needs: multiproc-dir -->  $PROMETHEUS_MULTIPROC_DIR, an empty directory
#   <!-- not-run: REASON -->       skipped, REASON shown in the test report
# With $COREVO_DOCS_INSTALLED=1 the blocks import the package installed in this
# interpreter's environment, not this checkout (CI: a venv with `pip install .`).
ROOT = Path(__file__).resolve().parent.parent
DOC_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"<!--\s*(needs|not-run):\s*(.*?)\s*-->")
NEEDS = {"redis", "postgres", "multiproc-dir"}


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    source: str
    needs: tuple[str, ...]
    not_run: str | None


def _blocks() -> list[Block]:
    found = []
    for page in DOC_PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if line.strip() != "```python":
                continue
            end = next(j for j in range(i + 1, len(lines))
                       if lines[j].strip().startswith("```"))
            marker = MARKER.search(lines[i - 1]) if i else None
            needs: tuple[str, ...] = ()
            not_run = None
            if marker and marker.group(1) == "needs":
                needs = tuple(n.strip() for n in marker.group(2).split(","))
            elif marker:
                not_run = marker.group(2)
            found.append(Block(str(page.relative_to(ROOT)), i + 1,
                               textwrap.dedent("\n".join(lines[i + 1:end]) + "\n"), needs,
                               not_run))
    return found


BLOCKS = _blocks()


def test_doc_blocks_are_found_and_markers_are_known() -> None:
    assert len(BLOCKS) >= 30
    unknown = {n for b in BLOCKS for n in b.needs} - NEEDS
    assert not unknown, f"unknown needs: {unknown} (known: {sorted(NEEDS)})"
    skipped = [f"{b.page}:{b.line} ({b.not_run})" for b in BLOCKS if b.not_run]
    assert len(skipped) <= 6, f"too many docs blocks that never run: {skipped}"


@pytest.mark.parametrize("block", BLOCKS, ids=[f"{b.page}:{b.line}" for b in BLOCKS])
def test_doc_block_runs(block: Block, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if block.not_run:
        pytest.skip(f"{block.page}:{block.line} not-run: {block.not_run}")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PROMETHEUS_MULTIPROC_DIR", "COREVO_WORKER", "PYTHONPATH")}
    installed = os.environ.get("COREVO_DOCS_INSTALLED") == "1"
    if not installed:
        env["PYTHONPATH"] = str(ROOT)
    if "redis" in block.needs:
        env["REDIS_URL"] = request.getfixturevalue("redis_url")
    if "postgres" in block.needs:
        env["DATABASE_URL"] = request.getfixturevalue("pg_dsn")
    if "multiproc-dir" in block.needs:
        (tmp_path / "metrics").mkdir()
        env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp_path / "metrics")
    snippet = tmp_path / "snippet.py"
    snippet.write_text(block.source, encoding="utf-8")
    runner = ["-m", "tests.helpers.run_snippet"]
    if installed:  # by path: nothing of the checkout on sys.path, and it says so
        runner = [str(ROOT / "tests" / "helpers" / "run_snippet.py"), "--not-under", str(ROOT)]
    done = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", *runner, str(snippet)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    said = f"{block.page}:{block.line}\n{block.source}\n--- stderr:\n{done.stderr}"
    assert done.returncode == 0, said
    assert "Warning" not in done.stderr, said  # a block a user pastes must not warn either


def test_the_syntax_error_example_fails_the_lint(tmp_path: Path) -> None:
    """docs/lint.md's COB900 block is not run as Python; the lint must reject it (exit 2)."""
    (block,) = [b for b in BLOCKS if b.page == "docs/lint.md" and b.not_run
                and "does not parse" in b.not_run]
    (tmp_path / "broken.py").write_text(block.source, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "lint", "broken.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "COB900" in done.stdout
