"""docs/lint.md's per-rule / per-confidence precision tables are bench/lint_precision.py's
output on the committed labels and run records (regenerated, never typed by hand)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from tests.helpers.bench_script import load

ROOT = Path(__file__).resolve().parent.parent


def _script() -> ModuleType:
    return load("lint_precision")


def test_docs_tables_are_the_scripts_output() -> None:
    script = _script()
    text = (ROOT / "docs" / "lint.md").read_text(encoding="utf-8")
    block = text.partition(script.START)[2].partition(script.END)[0]
    assert block.strip(), "docs/lint.md has no precision-tables block"
    assert block.lstrip("\n") == script.render(), (
        "docs/lint.md's precision tables are stale: python bench/lint_precision.py --write")


def test_findings_without_a_label_are_counted_apart(tmp_path: Path) -> None:
    script = _script()
    labels = tmp_path / "labels.tsv"
    run = tmp_path / "run.tsv"
    labels.write_text("project\tversion\tlocation\tcode\tverdict\treason\n"
                      "p\t1\ta.py:1\tCOB100\ttrue\tx\n"
                      "p\t1\ta.py:2\tCOB110\tfalse\tx\n"
                      "p\t0\ta.py:3\tCOB100\ttrue\tanother version\n")
    run.write_text("project\tversion\tlocation\tcode\tconfidence\n"
                   "p\t1\ta.py:1\tCOB100\thigh\n"
                   "p\t1\ta.py:2\tCOB110\tlow\n"
                   "p\t1\ta.py:3\tCOB100\thigh\n")
    rows = script.judged(labels, run)
    assert rows == [("COB100", "high", "true"), ("COB110", "low", "false"),
                    ("COB100", "high", "?")]
    lines = script.table("t", rows)
    assert "| high | 1 | 0 | 1 | 1.000 (0.21-1.00) |" in lines
    assert "| all | 1 | 1 | 1 | 0.500 (0.09-0.91) |" in lines
    assert "| COB110 | low | 0 | 1 | 0 | 0.000 (0.00-0.79) |" in lines
