"""Render ``dashboards/*.dashboard.py`` to the JSON committed beside each source.

A source is a Python file defining ``dashboard`` (a grafanalib ``Dashboard``), the
convention of grafanalib's own ``generate-dashboard``. grafanalib is imported only here,
when a source is executed, so the rest of the suite works without the extra.
"""

from __future__ import annotations

import json
import runpy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ...core.errors import ConfigError
from ...core.fileio import read_regular, write_files

SUFFIX: Final = ".dashboard.py"


@dataclass(frozen=True)
class Rendered:
    source: Path
    output: Path
    text: str

    @property
    def stale(self) -> bool:
        try:
            return read_regular(self.output) != self.text.encode("utf-8")
        except FileNotFoundError:
            return True
        except OSError as exc:  # a folder or FIFO where the JSON goes: never opened blocking
            raise ConfigError(f"cannot read: {exc.strerror or exc}", source=str(self.output)
                              ) from None


def sources(root: Path) -> list[Path]:
    """Dashboard sources under ``root``, sorted; an empty directory is a config error."""
    found = sorted(root.glob(f"*{SUFFIX}"))
    if not found:
        raise ConfigError(f"no *{SUFFIX} files in {root}", source="dashboards")
    return found


def output_path(source: Path) -> Path:
    return source.with_name(source.name.removesuffix(SUFFIX) + ".json")


def render(source: Path) -> Rendered:
    """Execute one source and encode its ``dashboard`` as stable, sorted JSON.

    A source that raises (or exits, or does not parse) or defines something that is not
    a grafanalib ``Dashboard`` is a ConfigError naming the file: it is the user's code.
    """
    from grafanalib._gen import DashboardEncoder
    from grafanalib.core import Dashboard

    try:
        namespace = runpy.run_path(str(source))
    except SyntaxError as exc:
        raise ConfigError(f"line {exc.lineno}: cannot parse: {exc.msg}", source=str(source)
                          ) from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - the source is arbitrary user code
        raise ConfigError(f"raised {type(exc).__name__}: {exc}", source=str(source)) from None
    board = namespace.get("dashboard")
    if board is None:
        raise ConfigError("defines no 'dashboard'", source=str(source))
    if not isinstance(board, Dashboard):
        raise ConfigError(f"'dashboard' is a {type(board).__name__}, not a grafanalib "
                          "Dashboard", source=str(source))
    try:
        data = board.to_json_data()
        text = json.dumps(data, cls=DashboardEncoder, indent=2, sort_keys=True) + "\n"
    except Exception as exc:  # noqa: BLE001 - panels built by user code
        raise ConfigError(f"cannot encode its dashboard: {type(exc).__name__}: {exc}",
                          source=str(source)) from None
    return Rendered(source, output_path(source), text)


def write_stale(rendered: list[Rendered]) -> list[Path]:
    """Write every stale output at once (temp files, then renames): a full disk or a
    read-only JSON leaves each output as it was. Returns what was written."""
    stale = [r for r in rendered if r.stale]
    try:
        write_files([(r.output, r.text.encode("utf-8")) for r in stale])
    except OSError as exc:
        raise ConfigError(f"cannot write: {exc.strerror or exc}",
                          source=exc.filename or "dashboards") from None
    return [r.output for r in stale]


def render_all(root: Path) -> list[Rendered]:
    return [render(p) for p in sources(root)]


def panel_queries(board: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target of every panel in a dashboard's JSON."""
    out: list[tuple[str, str]] = []
    stack = list(board.get("panels", []))
    while stack:
        panel = stack.pop(0)
        stack.extend(panel.get("panels", []))
        out += [(panel.get("title", ""), t["expr"]) for t in panel.get("targets", [])
                if t.get("expr")]
    return out


def load_json(root: Path) -> dict[Path, dict[str, Any]]:
    """The committed JSON of every dashboard source under ``root``."""
    return {output_path(p): json.loads(output_path(p).read_text(encoding="utf-8"))
            for p in sources(root)}
