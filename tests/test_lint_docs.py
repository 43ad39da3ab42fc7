"""Every registered rule code is documented in docs/lint.md with an example and a fix, and
the registry is the one place a code is defined (the flake8-async meta-test model)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import corevo_obs.tooling.lint.rules as rules_pkg
from corevo_obs.tooling.lint.rules import FAMILIES, RULES, Selection, message
from corevo_obs.tooling.lint.rules.base import Family, Spec, register

DOC = Path(__file__).parent.parent / "docs" / "lint.md"
RULES_DIR = Path(rules_pkg.__file__).parent


def sections() -> dict[str, str]:
    parts = re.split(r"^### (COB\d{3})\b.*$", DOC.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_code_has_a_section_with_example_and_fix() -> None:
    docs = sections()
    assert set(RULES) == set(docs), "registered codes and doc sections differ"
    for code, body in docs.items():
        assert "Example:" in body and "```python" in body, code
        assert "\nFix: " in body, code


def test_section_titles_are_the_registered_names() -> None:
    text = DOC.read_text()
    for code, rule in RULES.items():
        assert re.search(rf"^### {code} {re.escape(rule.name)}$", text, flags=re.M), code


def test_examples_are_valid_python() -> None:
    for code, body in sections().items():
        if code == "COB900":
            continue
        for block in re.findall(r"```python\n(.*?)```", body, flags=re.S):
            ast.parse(block)


def test_every_rule_module_opens_with_its_codes() -> None:
    for path in RULES_DIR.glob("[!_]*.py"):
        if path.name == "base.py":
            continue
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        head = doc.split(":")[0]
        named = set(re.findall(r"COB\d{3}", head))
        for lo, hi in re.findall(r"COB(\d{3})-COB(\d{3})", head):
            named |= {f"COB{n}" for n in range(int(lo), int(hi) + 1)}
        module = getattr(rules_pkg, path.stem)
        registered = {c for c, r in RULES.items()
                      if FAMILIES[r.family].__module__ == module.__name__}
        assert named == registered, f"{path.name}: docstring must open with its codes"


def test_each_code_is_written_once_in_the_rules_package() -> None:
    """A code string appears in exactly one rules module: its family's."""
    for code in RULES:
        homes = [p.name for p in RULES_DIR.glob("*.py") if f'"{code}"' in p.read_text()]
        assert len(homes) == 1, (code, homes)


def test_a_code_cannot_be_registered_twice() -> None:
    class Again(Family):
        family = "again"
        error_codes = {"COB111": Spec("x", "x", "{call}")}

    with pytest.raises(RuntimeError, match="COB111 defined twice"):
        register(Again)
    assert "again" not in FAMILIES


def test_messages_take_exactly_their_fields() -> None:
    assert message("COB104", call="time.sleep()", func="f").startswith("time.sleep()")
    with pytest.raises(ValueError, match="COB104"):
        message("COB104", call="time.sleep()", func="f", chain="")
    with pytest.raises(ValueError, match="COB110"):
        message("COB110", call="g()", func="f")


def test_selection_by_prefix() -> None:
    sel = Selection.of(select=("COB1",), ignore=("COB104", "COB11"))
    assert sel.enabled("COB100") and not sel.enabled("COB104")
    assert not sel.enabled("COB110") and not sel.enabled("COB900")
    assert not sel.any_of("chains") and sel.any_of("catalogued")
