"""Pickling for the lint's slotted, frozen records: the summaries a scan process sends
back are thousands of them per file batch."""

from __future__ import annotations

import dataclasses
from operator import attrgetter
from typing import Any, TypeVar

T = TypeVar("T")


def compact_pickle(cls: type[T]) -> type[T]:
    """Pickle a slotted frozen dataclass as (class, field values), rebuilt by its
    ``__init__``. dataclasses' own pickling of such a class walks ``fields()`` for every
    object in Python, both ways: it made sending a worker's summaries back twice as slow
    as the same records with a ``__dict__``."""
    names = tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    values = attrgetter(*names)
    if len(names) == 1:
        def __reduce__(self: Any) -> tuple[type[T], tuple[Any, ...]]:
            return cls, (values(self),)
    else:
        def __reduce__(self: Any) -> tuple[type[T], tuple[Any, ...]]:
            return cls, values(self)
    cls.__reduce__ = __reduce__  # type: ignore[method-assign]
    return cls
