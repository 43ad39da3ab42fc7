"""Which class's method a call on a subclass runs: ``Local("p").save()`` or
``self.save()`` in ``Local(Middle)`` where ``save`` is defined on ``Middle``'s base.

The per-file pass records each class's bases as the file names them (``FileResult.bases``)
and the names its body binds to anything but a sync method (``FileResult.shadows``: an
``async def save`` or ``save = None`` hides the base's ``save``). The run walks them after
the per-file pass, like ``returns.py``, so a summary stays keyed by its file's bytes.
The walk follows Python's C3 method resolution order, so in a diamond
``D(B, C)``, ``B(A)``, ``C(A)`` an ``async def m`` on ``C`` hides ``A.m`` from ``D`` as it does
at run time. A base outside the run (a library class) ends its own line of the order; a
hierarchy C3 rejects (Python raises ``TypeError`` at class creation) resolves to nothing.
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
        self._mros: dict[str, list[str]] = {}
        self.add(results)

    def add(self, results: Iterable[FileResult]) -> None:
        """More classes (a deferred module read later in the run)."""
        self._mros.clear()
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
        """``B.m`` -> ``A.m`` for the classes after ``B`` in its MRO, nearest first, up to a
        class whose body binds ``m`` otherwise (an ``async def``); nothing for a
        non-class or a class that binds ``m`` itself."""
        owner, _, attr = name.rpartition(".")
        if not owner or not self.bases:
            return
        owner = self.defining(owner)
        if attr in self.shadows.get(owner, ()):
            return
        for base in self.mro(owner)[1:]:
            if attr in self.shadows.get(base, ()):
                return
            yield f"{base}.{attr}"

    def mro(self, cls: str) -> list[str]:
        """C3 linearisation of ``cls`` (itself first), at most ``MAX_BASES`` classes past it;
        ``[cls]`` alone when the bases form a cycle or admit no C3 order (memoised until
        more classes are added)."""
        order = self._mros.get(cls)
        if order is None:
            order = self._mros[cls] = self._linearise(cls)
        return order

    def _linearise(self, cls: str) -> list[str]:
        """``mro``'s work. Iterative: each class's order is built once its bases' are, so
        no depth of hierarchy recurses."""
        done: dict[str, list[str]] = {}
        stack: list[tuple[str, tuple[str, ...]]] = [(cls, self._bases(cls))]
        on_stack = {cls}
        while stack:
            top, bases = stack[-1]
            pending = next((b for b in bases if b not in done), None)
            if pending is not None:
                if pending in on_stack or len(on_stack) > MAX_BASES:  # a cycle / too deep
                    return [cls]
                stack.append((pending, self._bases(pending)))
                on_stack.add(pending)
                continue
            stack.pop()
            on_stack.discard(top)
            merged = _c3([done[b] for b in bases] + [list(bases)])
            if merged is None:
                return [cls]
            done[top] = [top, *merged][:MAX_BASES + 1]
        return done[cls]

    def _bases(self, cls: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.defining(b) for b in self.bases.get(cls, ())))


def _c3(orders: list[list[str]]) -> list[str] | None:
    """The C3 merge of the bases' orders and the bases list, or None when none exists."""
    orders = [list(o) for o in orders if o]
    merged: list[str] = []
    while orders:
        head = next((o[0] for o in orders
                     if not any(o[0] in rest[1:] for rest in orders)), None)
        if head is None:
            return None
        merged.append(head)
        orders = [rest for o in orders if (rest := o[1:] if o[0] == head else o)]
    return merged
