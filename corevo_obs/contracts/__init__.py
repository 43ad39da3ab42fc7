"""Import-boundary contract with a shrink-only debt list (import-linter plugin).

``layering.DebtLayersContract`` is the import-linter contract type (it imports
import-linter, so it is only loaded by ``lint-imports`` or ``corevo-obs debt``);
``debt`` parses the debt file and ``ratchet`` compares it with a git base. Both of
those work without import-linter installed.
"""
