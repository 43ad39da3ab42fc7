"""Tooling that runs before merge: it reads code and the catalog, never the runtime.

- ``lint``: the AST lint for blocking calls in ``async def`` (``corevo-obs lint``).
- ``importcontract``: the import-linter contract type with a shrink-only debt list.
- ``grafana``: Grafana dashboards generated from the metric catalog.
- ``assets``: the shipped dashboard JSON and Prometheus alert rules.

None of these imports ``loop``, ``stages``, ``leases`` or any runtime module
(.importlinter states it), so a pre-commit hook loads no instrumentation.
"""
