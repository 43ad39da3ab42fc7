"""Run the shrink-only contracts of an import-linter configuration outside ``lint-imports``.

``corevo-obs debt`` needs the structured outcome (paid off / remaining / new) rather than
import-linter's report, so it reads the same configuration, builds the same graph with
grimp, and evaluates each contract of our type itself.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass
from typing import Any

from ...core.errors import ConfigError
from .boundary import Outcome, Violation, find_violations
from .contract import ShrinkOnlyLayersContract
from .debt import DebtEntry


@dataclass(frozen=True)
class Configured:
    """The contracts of our type in one configuration, and the graph they judge."""

    contracts: list[ShrinkOnlyLayersContract]
    graph: Any


def _is_ours(path: str) -> bool:
    module, _, name = path.strip().rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError):
        return False
    return isinstance(cls, type) and issubclass(cls, ShrinkOnlyLayersContract)


def _our_type_names(session: dict[str, Any]) -> set[str]:
    raw = session.get("contract_types") or []
    items = raw.splitlines() if isinstance(raw, str) else raw
    names = set()
    for item in items:
        name, sep, path = str(item).partition(":")
        if sep and _is_ours(path):
            names.add(name.strip())
    return names


def _flag(value: Any) -> bool:
    return str(value).lower() == "true"


def load(config: str | None) -> Configured:
    """Read the configuration (default: import-linter's own search) and build the graph."""
    from grimp import build_graph
    from importlinter.api import read_configuration
    from importlinter.domain.contract import InvalidContractOptions

    source = config or "import-linter configuration"
    if os.getcwd() not in sys.path:  # as lint-imports does: the project is importable from cwd
        sys.path.insert(0, os.getcwd())
    try:
        data = read_configuration(config)
    except FileNotFoundError as exc:
        raise ConfigError(str(exc), source=source) from None
    except Exception as exc:  # the INI/TOML readers raise parser-specific errors
        raise ConfigError(f"cannot read configuration: {exc}", source=source) from None
    session = data["session_options"]
    types = _our_type_names(session)
    contracts = []
    for options in data["contracts_options"]:
        if options.get("type") not in types:
            continue
        try:
            contracts.append(ShrinkOnlyLayersContract(options["name"], session, options))
        except InvalidContractOptions as exc:
            detail = "; ".join(f"{k}: {v}" for k, v in sorted(exc.errors.items()))
            raise ConfigError(f"contract {options['name']!r}: {detail}", source=source) from None
    if not contracts:
        raise ConfigError(
            f"no contract of type {ShrinkOnlyLayersContract.__module__}."
            f"{ShrinkOnlyLayersContract.__name__} (registered via contract_types)",
            source=source,
        )
    roots = session.get("root_packages")
    roots = roots.split() if isinstance(roots, str) else roots
    if not roots:
        raise ConfigError("root_packages (or root_package) is not set", source=source)
    try:
        graph = build_graph(
            *roots,
            include_external_packages=_flag(session.get("include_external_packages")),
            exclude_type_checking_imports=_flag(session.get("exclude_type_checking_imports")),
            cache_dir=None,
        )
    except Exception as exc:  # grimp: a root package that cannot be found or parsed
        raise ConfigError(f"cannot build the import graph: {exc}", source=source) from None
    return Configured(contracts, graph)


def check(config: str | None, base: str | None) -> list[tuple[str, Outcome]]:
    """Evaluate every shrink-only contract; raises ``CorevoObsError`` on bad input."""
    loaded = load(config)
    return [(c.name, c.evaluate(loaded.graph, base)) for c in loaded.contracts]


def current_violations(
    config: str | None,
) -> list[tuple[ShrinkOnlyLayersContract, dict[DebtEntry, Violation]]]:
    """Today's forbidden imports per contract, for ``debt init``."""
    loaded = load(config)
    return [
        (c, find_violations(loaded.graph, c.present_layers(loaded.graph)[0]))
        for c in loaded.contracts
    ]
