"""The lint against its sample corpus: every `# error: CODE` line reported, nothing else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from corevo_obs.tooling.lint import lint_paths, load_config

CORPUS = Path(__file__).parent / "lint_corpus"
EXPECT = re.compile(r"#\s*error:\s*(COB\d{3})")
CONFIG = load_config(CORPUS / "pyproject.toml")


def expected() -> set[tuple[str, int, str]]:
    out = set()
    for path in sorted(CORPUS.rglob("*.py")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            for code in EXPECT.findall(line):
                out.add((path.relative_to(CORPUS).as_posix(), lineno, code))
    return out


@pytest.fixture(scope="module")
def result():
    return lint_paths([str(CORPUS)], CONFIG, jobs=1)


def test_corpus_findings_match_expected_comments(result) -> None:
    got = {(Path(f.path).relative_to(CORPUS).as_posix(), f.line, f.code) for f in result.findings}
    want = expected()
    assert not result.errors
    assert sorted(want - got) == [], "missed"
    assert sorted(got - want) == [], "false positives"


def test_every_catalogued_code_has_a_positive_case() -> None:
    codes = {code for _, _, code in expected()}
    assert {f"COB10{i}" for i in range(8)} | {"COB110", "COB111"} <= codes


def _message(result, file: str, line_text: str) -> str:
    for f in result.findings:
        if f.path.endswith(file) and line_text in f.snippet:
            return f.message
    raise AssertionError(f"no finding for {line_text!r} in {file}")


def test_chain_is_in_the_message(result) -> None:
    msg = _message(result, "service.py", "store._stage(path, data)")
    assert msg.endswith("persist_artifact -> _stage -> _write_blob -> open()")
    msg = _message(result, "service.py", 'BlobStore("/tmp/x")')
    assert "persist_artifact -> BlobStore.__init__ -> os.makedirs()" in msg
    msg = _message(result, "service.py", "publish(path)")
    assert msg.endswith("persist_artifact -> publish -> upload() [@blocking]")
    msg = _message(result, "service.py", "return read_all(path)")
    assert msg.endswith("through_sync_only_modules -> read_all -> slurp -> open()")
    msg = _message(result, "service.py", "publish_blob(path)")
    assert msg.endswith("via_package_reexport -> publish -> upload() [@blocking]")
    msg = _message(result, "offloads.py", "write()")
    assert msg.endswith("nested_defs -> write -> os.remove()")


def test_aliases_are_reported_by_their_qualified_name(result) -> None:
    assert "time.sleep()" in _message(result, "sleeps.py", "snooze(0.1)")
    assert "requests.get()" in _message(result, "http_calls.py", "fetch(url)")
