"""The import-linter contract type: three layers plus a shrink-only debt file.

Register it in the import-linter configuration and use it like a built-in type::

    [importlinter]
    root_package = myapp
    contract_types =
        shrink_only_layers: corevo_obs.tooling.importcontract.contract.ShrinkOnlyLayersContract

    [importlinter:contract:layers]
    name = Control plane / contracts / kernel
    type = shrink_only_layers
    control_plane = myapp.platform
    contracts = myapp.contracts
    kernel = myapp.runtime
    debt_file = lint_rules/import-debt.txt

Both ``lint-imports`` and ``corevo-obs debt check`` run every check, the git ratchet
included; ``$COREVO_DEBT_BASE`` (or ``--base``) overrides ``ratchet_base``.
"""

from __future__ import annotations

from typing import Any

from grimp import ImportGraph
from importlinter import Contract, ContractCheck, fields, output
from importlinter.domain.contract import InvalidContractOptions

from ...core.errors import CorevoObsError
from .boundary import CONTRACTS, CONTROL_PLANE, KERNEL, Outcome, judge, missing_modules
from .debt import read_debt
from .ratchet import AUTO, load_baseline

_MISSING_MODES = ("error", "warn")


class ShrinkOnlyLayersContract(Contract):
    """Control plane and kernel never import each other; contracts import neither.

    Forbidden imports listed in ``debt_file`` are tolerated until they are fixed, and then
    their entry must go; the file may not gain entries compared with the git base.
    """

    type_name = "shrink_only_layers"

    control_plane = fields.SetField(subfield=fields.ModuleField())
    contracts = fields.SetField(subfield=fields.ModuleField(), required=False, default=set())
    kernel = fields.SetField(subfield=fields.ModuleField())
    debt_file = fields.StringField()
    ratchet_base = fields.StringField(required=False, default=AUTO)
    missing_modules = fields.StringField(required=False, default="error")

    def validate(self) -> None:
        errors: dict[str, str] = {}
        if str(self.missing_modules) not in _MISSING_MODES:
            errors["missing_modules"] = f"Must be one of {', '.join(_MISSING_MODES)}."
        seen: dict[str, str] = {}
        for layer, names in self.layers().items():
            for name in names:
                if name in seen:
                    errors[layer.replace(" ", "_")] = f"{name} is also in the {seen[name]} layer."
                seen[name] = layer
        if errors:
            raise InvalidContractOptions(errors)

    def layers(self) -> dict[str, list[str]]:
        """Layer name -> root module names, from the options."""
        options: dict[str, Any] = {
            CONTROL_PLANE: self.control_plane, CONTRACTS: self.contracts, KERNEL: self.kernel
        }
        return {layer: sorted(m.name for m in mods or ()) for layer, mods in options.items()}

    def present_layers(self, graph: ImportGraph) -> tuple[dict[str, list[str]], list[str]]:
        """The layers and a warning per missing module; raises if missing ones are errors."""
        layers = self.layers()
        missing = missing_modules(graph, layers)
        if missing and str(self.missing_modules) == "error":
            raise CorevoObsError(
                f"contract {self.name!r}: layer module(s) not found: {', '.join(missing)} "
                "(set missing_modules = warn to allow packages that do not exist yet)"
            )
        return layers, [f"layer module {m} not found: skipped" for m in missing]

    def evaluate(self, graph: ImportGraph, base: str | None = None) -> Outcome:
        """Judge ``graph``; ``base`` overrides the ratchet base. Raises ``CorevoObsError``."""
        layers, warnings = self.present_layers(graph)
        debt = read_debt(str(self.debt_file))
        baseline = load_baseline(str(self.debt_file), base, str(self.ratchet_base))
        if baseline.entries is None:
            warnings.append(baseline.note)
        return judge(graph, layers, debt, baseline, warnings)

    def check(self, graph: ImportGraph, verbose: bool) -> ContractCheck:
        try:
            outcome = self.evaluate(graph)
        except CorevoObsError as exc:
            return ContractCheck(kept=False, metadata={"problems": [str(exc)]})
        output.verbose_print(verbose, f"Ratchet: {outcome.baseline.note}")
        return ContractCheck(
            kept=outcome.kept,
            warnings=list(outcome.warnings),
            metadata={"problems": outcome.problems()},
        )

    def render_broken_contract(self, check: ContractCheck) -> None:
        for problem in check.metadata["problems"]:
            output.print_error(f"- {problem}", bold=False)
        output.new_line()
