"""COB111: a call to a function the project declared blocking, by the ``@blocking`` marker
(``corevo_obs.blocking``) or by the ``blocking`` list of its lint config.

Marked functions found in the linted tree are matched project-wide (see ``chains``); this
module recognises the marker and the configured names.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ..imports import ImportTracker, Ref
from .base import Family, Spec, register

if TYPE_CHECKING:
    from ..call_catalog import Catalog

CODE = "COB111"
CONFIGURED = "listed in the lint config"
MARKER = "@blocking marker"


@register
class DeclaredBlocking(Family):
    family = "declared"
    error_codes = {
        CODE: Spec("declared-blocking",
                   "A call to a function the project declared blocking (marker or config).",
                   "{call} is declared blocking ({why}) and is called inside async def {func}"),
    }


def configured(ref: Ref, catalog: Catalog) -> tuple[str, str, dict[str, str]] | None:
    """(code, display, extra fields) when ``ref`` names a configured blocking function."""
    if ref.name in catalog.blocking:
        return CODE, f"{ref.name}()", {"why": CONFIGURED}
    return None


def is_marked(node: ast.FunctionDef | ast.AsyncFunctionDef, tracker: ImportTracker,
              catalog: Catalog) -> bool:
    """True when ``node`` carries the ``@blocking`` marker (or a configured marker)."""
    for deco in node.decorator_list:
        ref = tracker.resolve(deco)
        if ref is not None and ref.name in catalog.markers:
            return True
    return False
