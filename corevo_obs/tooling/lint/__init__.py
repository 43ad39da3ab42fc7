"""The blocking-call lint: sync file, network, DB, subprocess and sleep calls inside
``async def``, followed through the project's own sync helpers (docs/lint.md)."""

from .call_catalog import Catalog, load_catalog
from .config import LintConfig, load_config
from .model import Finding
from .runner import LintResult, lint_paths

__all__ = ["Catalog", "Finding", "LintConfig", "LintResult", "lint_paths", "load_catalog",
           "load_config"]
