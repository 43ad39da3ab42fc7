"""Every rule code is documented in docs/lint.md with an example and a fix."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import corevo_obs.lint.rules as rules_pkg
from corevo_obs.lint import load_catalog

DOC = Path(__file__).parent.parent / "docs" / "lint.md"


def sections() -> dict[str, str]:
    parts = re.split(r"^### (COB\d{3})\b.*$", DOC.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_code_has_a_section_with_example_and_fix() -> None:
    docs = sections()
    codes = set(load_catalog().rules)
    assert codes == set(docs), "codes and doc sections differ"
    for code, body in docs.items():
        assert "Example:" in body and "```python" in body, code
        assert "\nFix: " in body, code


def test_examples_are_valid_python() -> None:
    for code, body in sections().items():
        if code == "COB900":
            continue
        for block in re.findall(r"```python\n(.*?)```", body, flags=re.S):
            ast.parse(block)


def test_every_rule_module_opens_with_its_codes() -> None:
    codes = set(load_catalog().rules)
    for path in Path(rules_pkg.__file__).parent.glob("[!_]*.py"):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        head = doc.split(":")[0]
        named = set(re.findall(r"COB\d{3}", head))
        assert named and named <= codes, f"{path.name}: docstring must open with CODE: summary"
