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

from ..errors import ConfigError

SUFFIX: Final = ".dashboard.py"


@dataclass(frozen=True)
class Rendered:
    source: Path
    output: Path
    text: str

    @property
    def stale(self) -> bool:
        try:
            return self.output.read_text(encoding="utf-8") != self.text
        except FileNotFoundError:
            return True


def sources(root: Path) -> list[Path]:
    """Dashboard sources under ``root``, sorted; an empty directory is a config error."""
    found = sorted(root.glob(f"*{SUFFIX}"))
    if not found:
        raise ConfigError(f"no *{SUFFIX} files in {root}", source="dashboards")
    return found


def output_path(source: Path) -> Path:
    return source.with_name(source.name.removesuffix(SUFFIX) + ".json")


def render(source: Path) -> Rendered:
    """Execute one source and encode its ``dashboard`` as stable, sorted JSON."""
    from grafanalib._gen import DashboardEncoder

    namespace = runpy.run_path(str(source))
    board = namespace.get("dashboard")
    if board is None:
        raise ConfigError("defines no 'dashboard'", source=str(source))
    data = board.to_json_data()
    text = json.dumps(data, cls=DashboardEncoder, indent=2, sort_keys=True) + "\n"
    return Rendered(source, output_path(source), text)


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
