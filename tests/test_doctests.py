"""Every ``>>>`` example in the library runs (none marked ``+SKIP``): examples that nothing
runs drift into examples that fail. A docstring example that cannot run here (a server, a
real host path) is written as a plain code block without ``>>>``. The docs pages' blocks
run as files in tests/test_doc_pages.py."""

from __future__ import annotations

import doctest
import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import corevo_obs
from tests.helpers.doc_pages import ROOT, page_blocks

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



def test_the_syntax_error_example_fails_the_lint(tmp_path: Path) -> None:
    """docs/lint.md's COB900 block is not run as Python; the lint must reject it (exit 2)."""
    (block,) = [b for b in page_blocks(ROOT / "docs" / "lint.md")
                if b.not_run and "does not parse" in b.not_run]
    (tmp_path / "broken.py").write_text(block.source, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "lint", "broken.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "COB900" in done.stdout
