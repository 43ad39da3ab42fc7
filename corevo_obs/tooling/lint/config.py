"""Lint configuration: one dataclass, filled from ``pyproject.toml [tool.corevo-obs.lint]``.

Each key is a typed field (``FIELDS``: the import-linter model), so adding an option is
one line. Every bad value is reported at once, each naming where it came from, so a user
fixes the whole table in one go instead of one error per run.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...core.errors import ConfigError
from ...core.nesting import loads_toml
from .noqa import NoqaPolicy

TABLE = "[tool.corevo-obs.lint]"
_CODE = re.compile(r"^COB\d{3}$")
_CODE_PREFIX = re.compile(r"^COB\d{0,3}$")
_QUALNAME = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_<>][\w<>]*)*(\.\*)?$")
_IDENT = re.compile(r"^[A-Za-z_]\w*$")


@dataclass(frozen=True)
class LintConfig:
    """What a project adds to the catalog and how findings are filtered.

    Example (pyproject.toml)::

        [tool.corevo-obs.lint]
        blocking = ["myapp.store.S3Store.put"]       # COB111 when called in async def
        non-blocking = ["myapp.cache.*"]              # proven fast: never flagged
        offload = { "myapp.pool.run_blocking" = 0 }   # callable argument runs in a thread
        offload-methods = { submit_job = 0 }          # the same, by method name, any receiver
        extend-calls = { COB105 = ["duckdb.connect"] }
        select = ["COB1"]                             # code prefixes reported (default: all)
        ignore = ["COB100"]
        bare-noqa = false                             # only `# noqa: CODE` (default: true)
        peer-noqa = false                             # `# noqa: ASYNC230` does not count
        exclude = ["migrations/*"]
        baseline = "lint-baseline.json"
        min-confidence = "low"                        # low / medium (default) / high
        src = ["src", "plugins"]                      # import roots besides the paths given
        follow-installed = true                       # chains enter this Python's packages
        installed = [".venv/lib/python3.11/site-packages"]  # ... or these directories
    """

    blocking: tuple[str, ...] = ()
    non_blocking: tuple[str, ...] = ()
    offload: dict[str, int] = field(default_factory=dict)
    offload_methods: dict[str, int] = field(default_factory=dict)
    extend_calls: dict[str, tuple[str, ...]] = field(default_factory=dict)
    markers: tuple[str, ...] = ()
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    bare_noqa: bool = True  # a noqa comment naming no code silences every code (noqa.py)
    peer_noqa: bool = True  # a peer's code (ASYNC230) silences the COB rule covering it
    baseline: str | None = None
    min_confidence: str = "medium"  # findings less sure than this are not reported
    src: tuple[str, ...] = ()  # import roots (like ruff's ``src``), relative to ``root``
    # chains may enter installed packages (the running Python's site-packages, and the
    # ``installed`` directories, relative to ``root``): their modules are read on demand
    follow_installed: bool = False
    installed: tuple[str, ...] = ()
    source: str = "defaults"
    root: str = ""  # the config file's directory ('' = the current directory)

    @property
    def noqa(self) -> NoqaPolicy:
        return NoqaPolicy(bare=self.bare_noqa, peers=self.peer_noqa)


class FieldError(ValueError):
    """A bad value for one key; the message says what was expected."""


class Field:
    """One typed option of the table (the import-linter ``fields`` model)."""

    def parse(self, value: Any) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class StringsField(Field):
    pattern: re.Pattern[str] = _QUALNAME
    what: str = "qualified name"
    expected: str = "a list of strings"

    def parse(self, value: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise FieldError(f"expected {self.expected}, got {value!r}")
        bad = [v for v in value if not self.pattern.match(v)]
        if bad:
            raise FieldError(f"not a {self.what}: {', '.join(map(repr, bad))}")
        return tuple(value)


@dataclass(frozen=True)
class IndexTableField(Field):
    """A table ``name = argument index`` (an int >= 0)."""

    keys: re.Pattern[str] = _QUALNAME

    def parse(self, value: Any) -> dict[str, int]:
        if not (isinstance(value, dict) and all(
                isinstance(k, str) and self.keys.match(k) and type(v) is int and v >= 0
                for k, v in value.items())):
            raise FieldError(f"expected a table name = argument index, got {value!r}")
        return dict(value)


@dataclass(frozen=True)
class CodeTableField(Field):
    """A table ``CODE = [qualified names]``."""

    def parse(self, value: Any) -> dict[str, tuple[str, ...]]:
        if not isinstance(value, dict):
            raise FieldError(f"expected a table CODE = [names], got {value!r}")
        problems: list[str] = []
        out: dict[str, tuple[str, ...]] = {}
        for code, names in value.items():
            try:
                CODES.parse([code])
                out[code] = NAMES.parse(names)
            except FieldError as exc:
                problems.append(f"{code}: {exc}")
        if problems:
            raise FieldError("; ".join(problems))
        return out


@dataclass(frozen=True)
class BoolField(Field):
    def parse(self, value: Any) -> bool:
        if not isinstance(value, bool):
            raise FieldError(f"expected true or false, got {value!r}")
        return value


@dataclass(frozen=True)
class PathField(Field):
    def parse(self, value: Any) -> str:
        if not (isinstance(value, str) and value):
            raise FieldError(f"expected a file path, got {value!r}")
        return value


@dataclass(frozen=True)
class ChoiceField(Field):
    choices: tuple[str, ...] = ()

    def parse(self, value: Any) -> str:
        if value not in self.choices:
            raise FieldError(f"expected one of {', '.join(self.choices)}, got {value!r}")
        return str(value)


NAMES = StringsField()
CODES = StringsField(_CODE, "rule code (COBnnn)")
FIELDS: dict[str, tuple[str, Field]] = {  # key -> (LintConfig attribute, field)
    "blocking": ("blocking", NAMES),
    "non-blocking": ("non_blocking", NAMES),
    "markers": ("markers", NAMES),
    "offload": ("offload", IndexTableField()),
    "offload-methods": ("offload_methods", IndexTableField(_IDENT)),
    "extend-calls": ("extend_calls", CodeTableField()),
    "select": ("select", StringsField(_CODE_PREFIX, "rule code or prefix (COB1, COB104)")),
    "ignore": ("ignore", CODES),
    "exclude": ("exclude", StringsField(re.compile(".*"), expected="a list of glob patterns")),
    "bare-noqa": ("bare_noqa", BoolField()),
    "peer-noqa": ("peer_noqa", BoolField()),
    "baseline": ("baseline", PathField()),
    "min-confidence": ("min_confidence", ChoiceField(("low", "medium", "high"))),
    "src": ("src", StringsField(re.compile(r"^[^\x00]+$"), "directory",
                                 "a list of directories")),
    "follow-installed": ("follow_installed", BoolField()),
    "installed": ("installed", StringsField(re.compile(r"^[^\x00]+$"), "directory",
                                             "a list of directories")),
}


def config_from_table(table: dict[str, Any], source: str) -> LintConfig:
    """Validate a ``[tool.corevo-obs.lint]`` table; raise one ConfigError listing every problem."""
    problems: list[str] = []
    kw: dict[str, Any] = {}
    for key, value in table.items():
        if key not in FIELDS:
            problems.append(f"unknown key {key!r}")
            continue
        attr, fld = FIELDS[key]
        try:
            kw[attr] = fld.parse(value)
        except FieldError as exc:
            problems.append(f"{key}: {exc}")
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
        data = loads_toml(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read: {exc}", source=str(file)) from None
    table = data.get("tool", {}).get("corevo-obs", {}).get("lint")
    root = str(file.resolve().parent)
    if table is None:
        return LintConfig(source=str(file), root=root)
    if not isinstance(table, dict):
        raise ConfigError("must be a table", source=f"{file} {TABLE}")
    return replace(config_from_table(table, f"{file} {TABLE}"), root=root)
