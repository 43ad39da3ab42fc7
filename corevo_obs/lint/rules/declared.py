"""COB111: a call to a function the project declared blocking, by the ``@blocking`` marker
(``corevo_obs.blocking``) or by the ``blocking`` list of its lint config.

Marked functions found in the linted tree are matched project-wide (see ``chains``); this
module recognises the marker and the configured names.
"""

from __future__ import annotations

import ast

from ..catalog import Catalog
from ..imports import ImportTracker, Ref

CODE = "COB111"


def configured(ref: Ref, catalog: Catalog) -> tuple[str, str] | None:
    """(code, display) when ``ref`` names a configured blocking function or method."""
    if ref.name in catalog.blocking:
        return CODE, f"{ref.name}()"
    return None


def is_marked(node: ast.FunctionDef | ast.AsyncFunctionDef, tracker: ImportTracker,
              catalog: Catalog) -> bool:
    """True when ``node`` carries the ``@blocking`` marker (or a configured marker)."""
    for deco in node.decorator_list:
        ref = tracker.resolve(deco)
        if ref is not None and ref.name in catalog.markers:
            return True
    return False
