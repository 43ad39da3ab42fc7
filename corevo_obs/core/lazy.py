"""Names a package resolves on first use (PEP 562), so importing it loads no backend.

One resolver for every package that keeps optional dependencies (redis, the OTel SDK)
out of its import: ``def __getattr__(name): return lazy.attribute(__name__, _LAZY,
globals(), name)``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, MutableMapping
from typing import Any


def attribute(package: str, modules: Mapping[str, str], namespace: MutableMapping[str, Any],
              name: str) -> Any:
    """``name`` from its submodule of ``package`` (``modules[name]``), kept in the
    package's ``namespace`` so later lookups are plain attribute reads."""
    module = modules.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = namespace[name] = getattr(importlib.import_module(f".{module}", package), name)
    return value
