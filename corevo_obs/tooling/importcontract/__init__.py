"""Import-boundary contract with a shrink-only debt list (import-linter plugin).

``contract.ShrinkOnlyLayersContract`` is the import-linter contract type and ``runner``
evaluates it for ``corevo-obs debt``; both import import-linter, so they are loaded only
when a check runs. ``debt`` (the file format), ``ratchet`` (the git base) and
``boundary`` (layers, violations, outcome on a grimp graph) work without it.
"""
