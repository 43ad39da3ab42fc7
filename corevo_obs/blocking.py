"""``@blocking``: declare that a sync function blocks, for the lint and the test-time guard.

At run time the marker costs nothing: it returns the very function it was given, with an
attribute set once at import. The blocking-call lint treats calls to marked functions
inside ``async def`` like calls to ``open()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])

MARKER_ATTR = "__corevo_blocking__"


def blocking(func: F) -> F:
    """Mark ``func`` as blocking (file, network, DB or subprocess I/O, or long CPU)."""
    try:
        setattr(func, MARKER_ATTR, True)
    except (AttributeError, TypeError):  # builtins and slotted callables: lint-only marker
        pass
    return func


def is_blocking(func: object) -> bool:
    return bool(getattr(func, MARKER_ATTR, False))
