"""A package under ``src/`` with no configuration: ruff's default ``src = [".", "src"]``
makes it ``layout_pkg.storage``, the name its users import (``src_layout.py``)."""

from pathlib import Path


def load(path: str) -> str:
    return Path(path).read_text()


def describe(path: str) -> str:
    return path.rpartition("/")[2]
