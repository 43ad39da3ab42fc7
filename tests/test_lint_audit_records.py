"""The frozen outside-audit records stay reproducible by the shared bench/lint_audit.py.

Audits 2026-12-07c/d/e/f/g/h/i/j were scored once; their tables.md and samples.json are records, not
outputs to refresh. Re-scoring each from its committed samples.json and verdicts.json must give
the committed files byte for byte, so a change to the shared scoring code that would alter a
frozen record fails here.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
AUDITS = ROOT / "bench" / "lint_audits"


def _lint_audit() -> ModuleType:
    """bench/ is not a package: load the module from its file."""
    spec = importlib.util.spec_from_file_location("lint_audit", ROOT / "bench" / "lint_audit.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["lint_audit"] = mod
    spec.loader.exec_module(mod)
    return mod


# audit -> the arguments its README records for `lint_audit.py report`
CASES = {
    "2026-12-07c": ("/tmp/2026-12-07c_src", None),
    "2026-12-07d": ("/tmp/2026-12-07d_src", "raw"),
    "2026-12-07e": ("/tmp/2026-12-07e_src", None),
    "2026-12-07f": ("/tmp/2026-12-07f_src", None),
    "2026-12-07g": ("/tmp/2026-12-07g_src", None),
    "2026-12-07h": ("/tmp/2026-12-07h_src", None),
    "2026-12-07i": ("/tmp/2026-12-07i_src", None),
    "2026-12-07j": ("/tmp/2026-12-07j_src", None),
    "2026-12-07k": ("/tmp/2026-12-07k_src", None),
    "2026-12-07l": ("/tmp/2026-12-07l_src", None),
    "2026-12-07m": ("/tmp/2026-12-07m_src", None),
    "2026-12-07n": ("/tmp/2026-12-07n_src", None),
    "2026-12-07o": ("/tmp/2026-12-07o_src", None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_report_regenerates_frozen_record(name: str, tmp_path: Path) -> None:
    """report over the committed samples and verdicts rewrites both files unchanged."""
    lint_audit = _lint_audit()
    audit = AUDITS / name
    for f in ("samples.json", "verdicts.json"):
        shutil.copy(audit / f, tmp_path / f)
    src, low = CASES[name]
    lint_audit.report(tmp_path, src, None if low is None else str(audit / low))
    assert (tmp_path / "tables.md").read_bytes() == (audit / "tables.md").read_bytes()
    assert (tmp_path / "samples.json").read_bytes() == (audit / "samples.json").read_bytes()


def test_readme_records_the_commands() -> None:
    """Each audit's README names the shared module's commands, with the seed from protocol.md."""
    lint_audit = _lint_audit()
    for name, (src, _) in CASES.items():
        readme = (AUDITS / name / "README.md").read_text()
        assert f"bench/lint_audit.py report bench/lint_audits/{name} --src {src}" in readme
        assert lint_audit.protocol_seed(AUDITS / name) > 0


def test_bad_audit_dir_is_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A directory without protocol.md or verdicts.json exits 2 with one line, no traceback."""
    lint_audit = _lint_audit()
    assert lint_audit.main(["sample", str(tmp_path), "--raw", "x", "--src", "y"]) == 2
    assert lint_audit.main(["report", str(tmp_path), "--src", "y"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and all(line.startswith("lint_audit: ") for line in err)
