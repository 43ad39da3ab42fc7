"""Parsing JSON and TOML whose nesting depth is someone else's choice.

``json`` and ``tomllib`` recurse once per level, so ``[[[[...`` a few thousand deep raises
``RecursionError`` (which no caller expects from a decoder) or worse. These wrappers turn
it into the decoder's own error, a ``ValueError``, so every reader's existing "not valid
JSON/TOML" branch answers it with one line.
"""

from __future__ import annotations

import json
import tomllib
from typing import Any

TOO_DEEP = "nested too deeply"


def loads_json(text: str | bytes) -> Any:
    """``json.loads`` that raises ``ValueError`` (not ``RecursionError``) on deep nesting."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(TOO_DEEP) from None


def loads_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads`` that raises ``TOMLDecodeError`` (not ``RecursionError``) on deep
    nesting."""
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise tomllib.TOMLDecodeError(TOO_DEEP) from None
