"""Load a bench script as a module for the tests that check the docs' figures against it
(its imports of bench/stats.py and bench/lint_realworld/ resolve from beside it)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent.parent / "bench"


def load(name: str) -> ModuleType:
    """``bench/<name>.py``, imported once under ``name``."""
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
