"""The lint over a large real tree (the installed site-packages): no crash, and the only
unparsable files are ones CPython itself rejects.

``COREVO_LINT_SITE_PACKAGES`` names another tree: CI sets it to the dev environment's
site-packages when it runs these tests under the other installed Pythons, whose own
site-packages hold little more than pytest, so each interpreter's ``ast`` meets the same
thousands of real files."""

from __future__ import annotations

import ast
import os
import site
import time
from pathlib import Path

from corevo_obs.tooling.lint import lint_paths

SITE = Path(os.environ.get("COREVO_LINT_SITE_PACKAGES") or site.getsitepackages()[0])


def test_whole_site_packages_without_a_crash() -> None:
    start = time.monotonic()
    result = lint_paths([str(SITE)], jobs=os.cpu_count() or 2)
    took = time.monotonic() - start
    assert result.files > 2000, "expected thousands of files"
    for err in result.errors:
        assert err.code == "COB900"
        try:
            ast.parse(Path(err.path).read_bytes())
        except (SyntaxError, ValueError):
            continue
        raise AssertionError(f"lint could not handle a valid file: {err}")
    assert result.findings, "a tree this size has blocking calls in async def"
    assert all(f.code.startswith("COB1") for f in result.findings)
    print(f"{result.files} files, {len(result.findings)} findings in {took:.1f} s")
