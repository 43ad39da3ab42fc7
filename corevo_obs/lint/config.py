"""Lint configuration: one dataclass, filled from ``pyproject.toml [tool.corevo-obs.lint]``.

Every bad value is reported at once, each naming where it came from, so a user fixes the
whole table in one go instead of one error per run.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigError

TABLE = "[tool.corevo-obs.lint]"
_CODE = re.compile(r"^COB\d{3}$")
_QUALNAME = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_<>][\w<>]*)*(\.\*)?$")


@dataclass(frozen=True)
class LintConfig:
    """What a project adds to the catalog and how findings are filtered.

    Example (pyproject.toml)::

        [tool.corevo-obs.lint]
        blocking = ["myapp.store.S3Store.put"]       # COB111 when called in async def
        non-blocking = ["myapp.cache.*"]              # proven fast: never flagged
        offload = { "myapp.pool.run_blocking" = 0 }   # callable argument runs in a thread
        extend-calls = { COB105 = ["duckdb.connect"] }
        ignore = ["COB100"]
        exclude = ["migrations/*"]
        baseline = "lint-baseline.json"
    """

    blocking: tuple[str, ...] = ()
    non_blocking: tuple[str, ...] = ()
    offload: dict[str, int] = field(default_factory=dict)
    extend_calls: dict[str, tuple[str, ...]] = field(default_factory=dict)
    markers: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    bare_noqa: bool = False
    baseline: str | None = None
    source: str = "defaults"


def _strings(value: Any, key: str, problems: list[str], pattern: re.Pattern[str] = _QUALNAME,
             what: str = "qualified name") -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.append(f"{key}: expected a list of strings, got {value!r}")
        return ()
    bad = [v for v in value if not pattern.match(v)]
    if bad:
        problems.append(f"{key}: not a {what}: {', '.join(map(repr, bad))}")
    return tuple(value)


def _codes(value: Any, key: str, problems: list[str]) -> tuple[str, ...]:
    return _strings(value, key, problems, _CODE, "rule code (COBnnn)")


def config_from_table(table: dict[str, Any], source: str) -> LintConfig:
    """Validate a ``[tool.corevo-obs.lint]`` table; raise one ConfigError listing every problem."""
    problems: list[str] = []
    kw: dict[str, Any] = {}
    for key, value in table.items():
        if key in ("blocking", "non-blocking", "markers"):
            kw[key.replace("-", "_")] = _strings(value, key, problems)
        elif key == "exclude":
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                kw["exclude"] = tuple(value)
            else:
                problems.append(f"exclude: expected a list of glob patterns, got {value!r}")
        elif key == "ignore":
            kw["ignore"] = _codes(value, key, problems)
        elif key == "offload":
            ok = isinstance(value, dict) and all(
                isinstance(k, str) and type(v) is int and v >= 0 for k, v in value.items()
            )
            if ok:
                kw["offload"] = dict(value)
            else:
                problems.append(f"offload: expected a table name = argument index, got {value!r}")
        elif key == "extend-calls":
            if not isinstance(value, dict):
                problems.append(f"extend-calls: expected a table CODE = [names], got {value!r}")
                continue
            calls: dict[str, tuple[str, ...]] = {}
            for code, names in value.items():
                _codes([code], "extend-calls", problems)
                calls[code] = _strings(names, f"extend-calls.{code}", problems)
            kw["extend_calls"] = calls
        elif key == "bare-noqa":
            if isinstance(value, bool):
                kw["bare_noqa"] = value
            else:
                problems.append(f"bare-noqa: expected true or false, got {value!r}")
        elif key == "baseline":
            if isinstance(value, str) and value:
                kw["baseline"] = value
            else:
                problems.append(f"baseline: expected a file path, got {value!r}")
        else:
            problems.append(f"unknown key {key!r}")
    if problems:
        raise ConfigError("; ".join(problems), source=source)
    return LintConfig(source=source, **kw)


def load_config(path: str | Path | None = None) -> LintConfig:
    """Read the lint table from ``path`` (a pyproject.toml); defaults when there is none.

    With ``path=None`` the ``pyproject.toml`` of the current directory is used if present.
    """
    explicit = path is not None
    file = Path(path) if path is not None else Path("pyproject.toml")
    if not file.is_file():
        if explicit:
            raise ConfigError("config file not found", source=str(file))
        return LintConfig()
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", source=str(file)) from None
    table = data.get("tool", {}).get("corevo-obs", {}).get("lint")
    if table is None:
        return LintConfig(source=str(file))
    if not isinstance(table, dict):
        raise ConfigError("must be a table", source=f"{file} {TABLE}")
    return config_from_table(table, f"{file} {TABLE}")
