"""The lint on flake8-async-style eval files (tests/lint_eval): every ``# error: CODE``
line reported with that code (an ASYNC code is met by the COB code listing it as a peer),
nothing else reported; flake8-async runs on the same files for the comparison figure."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from corevo_obs.tooling.lint import LintConfig, lint_paths
from corevo_obs.tooling.lint.rules import RULES

EVAL = Path(__file__).parent / "lint_eval"
EXPECT = re.compile(r"#\s*error:\s*((?:ASYNC|COB)\d{3})")
# ``# error: COB100 [medium]``: the finding must also carry that confidence
TIERED = re.compile(r"#\s*error:\s*(COB\d{3})\s*\[(high|medium|low)\]")
PEER_OF = {peer: code for code, rule in RULES.items() for peer in rule.peers}
# the offload spelled by a project's own config (the configurable method-name offload)
CONFIG = LintConfig(offload_methods={"submit_blocking": 0})

Line = tuple[str, int]


def labels() -> dict[Line, set[str]]:
    """(file, line) -> the codes marked on it."""
    out: dict[Line, set[str]] = {}
    for path in sorted(EVAL.rglob("*.py")):
        for lineno, text in enumerate(path.read_text().splitlines(), 1):
            for code in EXPECT.findall(text):
                out.setdefault((where(path), lineno), set()).add(code)
    return out


def tiers() -> dict[tuple[str, int, str], str]:
    """(file, line, code) -> the confidence marked for it."""
    out: dict[tuple[str, int, str], str] = {}
    for path in sorted(EVAL.rglob("*.py")):
        for lineno, text in enumerate(path.read_text().splitlines(), 1):
            for code, tier in TIERED.findall(text):
                out[(where(path), lineno, code)] = tier
    return out


def where(path: str | Path) -> str:
    """A file's name relative to tests/lint_eval (packages such as xmod/ included)."""
    return Path(path).resolve().relative_to(EVAL.resolve()).as_posix()


def score(want: dict[Line, set[str]], got: dict[Line, set[str]],
          meets: dict[str, str]) -> tuple[float, float, list[Line], list[Line]]:
    """(recall, precision, missed lines, false-positive lines)."""
    missed = sorted(k for k, codes in want.items()
                    if not all(meets.get(c, c) in got.get(k, set()) for c in codes))
    false = sorted(k for k in got if k not in want)
    hits = len(want) - len(missed)
    recall = hits / len(want)
    precision = hits / (hits + len(false)) if hits + len(false) else 1.0
    return recall, precision, missed, false


def test_every_asyncio_async2xx_rule_has_an_eval_file() -> None:
    rules = {c for codes in labels().values() for c in codes if c.startswith("ASYNC")}
    assert rules == {"ASYNC210", "ASYNC211", "ASYNC212", "ASYNC220", "ASYNC221",
                     "ASYNC222", "ASYNC230", "ASYNC231", "ASYNC232", "ASYNC240",
                     "ASYNC250", "ASYNC251"}
    assert set(PEER_OF) >= rules, "a peer code no COB rule covers"


def test_lint_meets_every_marker_and_nothing_else() -> None:
    result = lint_paths([str(EVAL)], CONFIG, jobs=1)
    assert not result.errors
    got: dict[Line, set[str]] = {}
    for f in result.findings:
        got.setdefault((where(f.path), f.line), set()).add(f.code)
    recall, precision, missed, false = score(labels(), got, PEER_OF)
    print(f"corevo-obs on lint_eval: recall {recall:.2f} precision {precision:.2f} "
          f"({len(labels())} labelled lines)")
    assert missed == [], "missed"
    assert false == [], "false positives"
    sure = {(where(f.path), f.line, f.code): f.confidence for f in result.findings}
    marked = tiers()
    assert marked, "no confidence marked in tests/lint_eval"
    assert {k: sure.get(k) for k in marked} == marked, "confidence"


@pytest.mark.skipif(importlib.util.find_spec("flake8_async") is None,
                    reason="flake8-async not installed")
def test_flake8_async_figure_on_the_same_files() -> None:
    """The comparison figure (docs/lint.md): flake8-async's recall on its own rule codes."""
    asyncs = {k: {c for c in v if c.startswith("ASYNC")} for k, v in labels().items()}
    asyncs = {k: v for k, v in asyncs.items() if v}
    proc = subprocess.run(
        [sys.executable, "-m", "flake8", "--select", "ASYNC2", "--isolated",
         "--format", "%(path)s:%(row)d:%(code)s", str(EVAL)],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    got: dict[Line, set[str]] = {}
    for row in proc.stdout.split():
        path, line, code = row.rsplit(":", 2)
        got.setdefault((where(path), int(line)), set()).add(code)
    on_async = {k: v for k, v in got.items() if k in asyncs or not labels().get(k)}
    recall, precision, _, _ = score(asyncs, on_async, {})
    print(f"flake8-async on lint_eval (its own codes): recall {recall:.2f} "
          f"precision {precision:.2f}")
    assert got, "flake8-async found nothing: is it running its ASYNC rules?"
