"""The held-out fixed-bug set parses, its run record covers every bug and tool, and
docs/lint.md's recall table is bench/lint_fixed_bugs.py's output on that record (no
download: the record is committed)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests.helpers.bench_script import load

ROOT = Path(__file__).resolve().parent.parent


def _script() -> ModuleType:
    return load("lint_fixed_bugs")


def test_bug_list_parses() -> None:
    script = _script()
    bugs = script.load_bugs()
    assert len(bugs) >= 15
    assert len({b.id for b in bugs}) == len(bugs)
    for bug in bugs:
        assert bug.lines and all(n > 0 for n in bug.lines), bug.id
        assert bug.path.endswith(".py") and bug.function and bug.source, bug.id
        assert bug.version != bug.fixed_version, bug.id


def test_record_covers_every_bug_and_tool() -> None:
    script = _script()
    ids = {b.id for b in script.load_bugs()}
    record = script.load_record()
    assert {(r["id"], r["tool"]) for r in record} == {(i, t) for i in ids for t in script.TOOLS}
    assert len(record) == len(ids) * len(script.TOOLS)
    for row in record:
        assert row["found"] in ("0", "1")
        assert (row["how"] in ("line", "chain")) == (row["found"] == "1")


def test_docs_table_is_the_scripts_output() -> None:
    script = _script()
    text = (ROOT / "docs" / "lint.md").read_text(encoding="utf-8")
    block = text.partition(script.START)[2].partition(script.END)[0]
    assert block.strip(), "docs/lint.md has no fixed-bugs-table block"
    assert block.lstrip("\n") == script.render(), (
        "docs/lint.md's fixed-bug recall table is stale: python bench/lint_fixed_bugs.py --write")


def test_matching_rule() -> None:
    script = _script()
    bug = script.load_bugs()[0]
    chain_msg = (f"g() blocks inside async def C.go: C.go -> g -> {bug.function} -> "
                 "socket.getfqdn()")
    on_line = script.Finding(bug.path, bug.lines[0], "ASYNC210", "", "")
    assert script.match(bug, on_line) == "line"
    assert script.match(bug, script.Finding(bug.path, bug.lines[0], "ASYNC109", "", "")) is None
    assert script.match(bug, script.Finding("x.py", 1, "COB110", chain_msg, "medium")) == "chain"
    # the chain's first element is the call site's async def, not a function it reaches
    first = f"g() blocks inside async def {bug.function}: {bug.function} -> g -> open()"
    assert script.match(bug, script.Finding("x.py", 1, "COB110", first, "medium")) is None
