"""Which class's method a call on a subclass runs: ``Local("p").save()`` or
``self.save()`` in ``Local(Middle)`` where ``save`` is defined on ``Middle``'s base.

The per-file pass records each class's bases as the file names them (``FileResult.bases``)
and the names its body binds to anything but a sync method (``FileResult.shadows``: an
``async def save`` or ``save = None`` hides the base's ``save``). The run walks them after
the per-file pass, like ``returns.py``, so a summary stays keyed by its file's bytes.
The walk is depth first from the left, not Python's C3 order: a diamond may pick the
other base's method.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from .model import FileResult
from .returns import follow_reexport

MAX_BASES = 16  # classes visited up one hierarchy
MAX_HOPS = 4  # re-exports followed to name a base where it is defined


class Hierarchy:
    """``inherited("pkg.B.m")`` -> ``pkg.A.m`` for the bases ``A`` that may define ``m``."""

    def __init__(self, results: Iterable[FileResult] = (),
                 reexports: Mapping[str, str] | None = None) -> None:
        self.bases: dict[str, tuple[str, ...]] = {}
        self.shadows: dict[str, frozenset[str]] = {}
        self.reexports = reexports if reexports is not None else {}
        self.add(results)

    def add(self, results: Iterable[FileResult]) -> None:
        """More classes (a deferred module read later in the run)."""
        for r in results:
            self.bases.update(r.bases)
            self.shadows.update(r.shadows)

    def __bool__(self) -> bool:
        return bool(self.bases)

    def defining(self, name: str) -> str:
        """Where a re-exported name is defined (a few hops at most)."""
        for _ in range(MAX_HOPS):
            target = follow_reexport(name, self.reexports)
            if target is None:
                break
            name = target
        return name

    def inherited(self, name: str) -> Iterator[str]:
        """``B.m`` -> ``A.m`` for the bases of ``B`` and theirs, nearest first, up to a
        class whose body binds ``m`` otherwise (an ``async def``); nothing for a
        non-class or a class that binds ``m`` itself."""
        owner, _, attr = name.rpartition(".")
        if not owner or not self.bases:
            return
        owner = self.defining(owner)
        if attr in self.shadows.get(owner, ()):
            return
        seen = {owner}
        stack = list(reversed(self.bases.get(owner, ())))
        while stack and len(seen) <= MAX_BASES:
            base = self.defining(stack.pop())
            if base in seen:
                continue
            seen.add(base)
            if attr in self.shadows.get(base, ()):
                return
            yield f"{base}.{attr}"
            stack.extend(reversed(self.bases.get(base, ())))
