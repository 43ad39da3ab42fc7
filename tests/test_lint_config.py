"""Typed config fields: every bad value reported at once with its key; select and
offload-methods change what runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from corevo_obs.core.errors import ConfigError
from corevo_obs.tooling.lint import lint_paths
from corevo_obs.tooling.lint.config import FIELDS, LintConfig, config_from_table

APP = '''import os
import time


def helper() -> None:
    os.remove("x")


async def handler(pool) -> None:
    time.sleep(1)
    helper()
    await pool.run_blocking(lambda: os.listdir("."))
'''


def test_bad_values_are_reported_together() -> None:
    with pytest.raises(ConfigError) as err:
        config_from_table({"select": ["E5"], "offload-methods": {"a.b": 0},
                           "extend-calls": {"COB9": ["x"]}, "bare-noqa": "yes"}, "t.toml")
    text = str(err.value)
    for part in ("select: not a rule code or prefix", "offload-methods: expected a table",
                 "extend-calls: COB9: not a rule code", "bare-noqa: expected true or false"):
        assert part in text


def test_every_field_maps_to_a_config_attribute() -> None:
    for attr, _ in FIELDS.values():
        assert hasattr(LintConfig(), attr)


def test_select_and_offload_methods(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    codes = [f.code for f in lint_paths([str(tmp_path)], LintConfig(), jobs=1).findings]
    assert codes == ["COB104", "COB110", "COB100"]
    only = LintConfig(select=("COB11",), offload_methods={"run_blocking": 0})
    assert [f.code for f in lint_paths([str(tmp_path)], only, jobs=1).findings] == ["COB110"]
