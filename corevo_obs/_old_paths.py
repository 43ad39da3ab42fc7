"""The 0.1 module paths that moved in 0.2's tree: still importable, with a warning.

A meta path finder answers only for the old names and hands back the module at its new
place (the same object, so ``isinstance`` and monkeypatching see one module). An old
import warns once per process; the aliases are removed in 0.3.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Final, cast

if TYPE_CHECKING:
    from importlib.abc import Loader

#: old dotted path -> new one; a submodule of an old package moves with it
MOVED_MODULES: Final = {
    "corevo_obs.errors": "corevo_obs.core.errors",
    "corevo_obs.identity": "corevo_obs.core.identity",
    "corevo_obs.catalog": "corevo_obs.core.catalog",
    "corevo_obs.metrics": "corevo_obs.core.metrics",
    "corevo_obs.guard": "corevo_obs.core.guard",
    "corevo_obs.fileio": "corevo_obs.core.fileio",
    "corevo_obs.blocking": "corevo_obs.core.marker",
    "corevo_obs.monitor": "corevo_obs.integrations.monitor",
    "corevo_obs.pyspy": "corevo_obs.integrations.pyspy",
    "corevo_obs.pytest_plugin": "corevo_obs.integrations.pytest_plugin",
    "corevo_obs.lint.catalog": "corevo_obs.tooling.lint.call_catalog",
    "corevo_obs.lint.guards": "corevo_obs.tooling.lint.narrowing",
    "corevo_obs.lint": "corevo_obs.tooling.lint",
    "corevo_obs.contracts": "corevo_obs.tooling.importcontract",
    "corevo_obs.dashboards": "corevo_obs.tooling.grafana",
    "corevo_obs.assets": "corevo_obs.tooling.assets",
}
_LONGEST_FIRST: Final = sorted(MOVED_MODULES, key=len, reverse=True)


def new_path(name: str) -> str | None:
    """Where the 0.1 module ``name`` lives now; None when it did not move."""
    for old in _LONGEST_FIRST:
        if name == old or name.startswith(old + "."):
            return MOVED_MODULES[old] + name[len(old):]
    return None


class _Alias:
    """Loads an old name as the module at its new place."""

    def __init__(self, new: str) -> None:
        self.new = new
        self.spec: ModuleSpec | None = None

    def create_module(self, spec: ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} moved to {self.new} (the old path is removed in 0.3)",
                      DeprecationWarning, stacklevel=2)  # importlib's frames are skipped
        module = importlib.import_module(self.new)
        self.spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # the import system stamped the alias's spec on the shared module: put its own back
        module.__spec__ = self.spec


class OldPathFinder:
    """On ``sys.meta_path`` ahead of the path finder, silent for every other name."""

    @classmethod
    def find_spec(cls, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        new = new_path(fullname)
        if new is None:
            return None
        return ModuleSpec(fullname, cast("Loader", _Alias(new)))  # importlib.abc costs 0.6 ms


def install() -> None:
    if OldPathFinder not in sys.meta_path:
        sys.meta_path.insert(0, OldPathFinder)  # type: ignore[arg-type]
