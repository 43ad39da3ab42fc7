"""Find forbidden direct imports between the three layers and judge them against the debt.

The layers (docs/contracts.md): a control plane, neutral contracts, and the runtime kernel.
The control plane may not import the kernel; the kernel reaches the control plane only
through the contracts layer; the contracts layer, being neutral, imports neither. Only
direct imports are judged, because a debt entry names one import statement's modules.
This module needs a grimp ``ImportGraph``-like object but not import-linter itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .debt import DebtEntry
from .ratchet import Baseline

CONTROL_PLANE, CONTRACTS, KERNEL = "control plane", "contracts", "kernel"
FORBIDDEN: frozenset[tuple[str, str]] = frozenset(
    {(CONTROL_PLANE, KERNEL), (KERNEL, CONTROL_PLANE), (CONTRACTS, CONTROL_PLANE),
     (CONTRACTS, KERNEL)}
)


@dataclass(frozen=True)
class Violation:
    """A forbidden direct import, with every line it occurs on."""

    entry: DebtEntry
    lines: tuple[int, ...]
    importer_layer: str
    imported_layer: str

    def describe(self) -> str:
        where = f"line {', '.join(map(str, self.lines))}" if self.lines else "line ?"
        return (
            f"{self.entry.importer} -> {self.entry.imported} ({where}): "
            f"the {self.importer_layer} may not import the {self.imported_layer}"
        )


def missing_modules(graph: Any, layers: Mapping[str, Iterable[str]]) -> list[str]:
    """Layer roots that are not in the graph (a typo, or a package not written yet)."""
    return sorted({m for roots in layers.values() for m in roots if m not in graph.modules})


def _layer_of(graph: Any, layers: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """Each module's layer; a nested root wins over its parent (most specific first)."""
    roots = sorted(
        ((root, layer) for layer, names in layers.items() for root in names
         if root in graph.modules),
        key=lambda item: item[0].count("."),
    )
    owner: dict[str, str] = {}
    for root, layer in roots:
        for module in (root, *graph.find_descendants(root)):
            owner[module] = layer
    return owner


def find_violations(graph: Any, layers: Mapping[str, Iterable[str]]) -> dict[DebtEntry, Violation]:
    """All forbidden direct imports in ``graph`` for ``layers`` (layer name -> root modules)."""
    owner = _layer_of(graph, layers)
    found: dict[DebtEntry, Violation] = {}
    for importer, importer_layer in sorted(owner.items()):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            imported_layer = owner.get(imported)
            if imported_layer is None or (importer_layer, imported_layer) not in FORBIDDEN:
                continue
            details = graph.get_import_details(importer=importer, imported=imported)
            lines = tuple(sorted({d["line_number"] for d in details if d.get("line_number")}))
            entry = DebtEntry(importer, imported)
            found[entry] = Violation(entry, lines, importer_layer, imported_layer)
    return found


@dataclass(frozen=True)
class Outcome:
    """Today's violations judged against the debt file and its base version."""

    violations: Mapping[DebtEntry, Violation]
    debt: frozenset[DebtEntry]
    baseline: Baseline
    warnings: tuple[str, ...] = field(default=())

    @property
    def new(self) -> list[Violation]:
        return [v for e, v in sorted(self.violations.items()) if e not in self.debt]

    @property
    def stale(self) -> list[DebtEntry]:
        return sorted(self.debt - self.violations.keys())

    @property
    def remaining(self) -> list[DebtEntry]:
        return sorted(self.debt & self.violations.keys())

    @property
    def added(self) -> list[DebtEntry]:
        base = self.baseline.entries
        return [] if base is None else sorted(self.debt - base)

    @property
    def paid_off(self) -> list[DebtEntry]:
        base = self.baseline.entries
        return [] if base is None else sorted(base - self.debt)

    @property
    def kept(self) -> bool:
        return not (self.new or self.stale or self.added)

    def problems(self) -> list[str]:
        """One line per failure, in the order a reader fixes them."""
        return (
            [f"new forbidden import {v.describe()}" for v in self.new]
            + [f"stale debt entry {e}: the import is gone, delete the line" for e in self.stale]
            + [
                f"debt entry {e} was added since the base: fix the import instead"
                for e in self.added
            ]
        )


def judge(
    graph: Any,
    layers: Mapping[str, Iterable[str]],
    debt: frozenset[DebtEntry],
    baseline: Baseline,
    warnings: Iterable[str] = (),
) -> Outcome:
    """Evaluate the contract: violations vs the debt, and the debt vs the base."""
    return Outcome(find_violations(graph, layers), debt, baseline, tuple(warnings))
