"""What a helper of the tree returns, across modules: ``client = make_client()`` where
``make_client`` (in another module) is annotated ``-> httpx.Client`` or returns
``httpx.Client(...)`` gives ``client`` that type, project-wide.

The per-file pass cannot know a type defined in another file, so it names the value by
where it came from (a *deferred* type): the qualified name of the function that made it
(``pkg.mod_b.make_client``), or of the method (``pkg.store.Store.open``). Each file also
records what its own functions return, as far as that file can tell (``FileResult
.returns``: a catalog type, a class, or again a deferred name). This module chains those
records over the whole run, through re-exports, so summaries stay per-file (the cache
keys them by the file's bytes alone) and a change in ``mod_b`` changes what ``mod_a``'s
unchanged summary resolves to.

A qualified name defined in two files, or one that a file could not tell apart (two
different return types), resolves to nothing: unresolved means unflagged.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from .imports import GETTER

if TYPE_CHECKING:
    from .hierarchy import Hierarchy

AMBIGUOUS = "?"
# what a method returns when it hands back the receiver's own class (``-> Self``, ``return
# cls(...)`` in a classmethod, ``return self``): ``Sub.make`` inherited from ``Base.make``
# gives a ``Sub``, so the marker is read against the name being resolved, never as a type
SELF_TYPE = "<Self>"
MAX_STEPS = 12  # factories returning factories' results: more is a cycle or not worth it


class ReturnTypes:
    """``resolve(deferred)`` -> the type it stands for, as far as the run's summaries say."""

    def __init__(self, returns: Iterable[tuple[str, str]],
                 reexports: Mapping[str, str] | None = None,
                 hierarchy: Hierarchy | None = None, written: Iterable[str] = ()) -> None:
        self.hierarchy = hierarchy  # getters a class inherits (``B.p`` -> ``A.p#get``)
        # attributes assigned on other objects somewhere (``obj.x = ...``): ``C.x#get``,
        # an attribute's or a property's type as its class sees it, may not hold
        self.written = frozenset(written)
        self.returns: dict[str, str] = {}
        self.reexports = reexports or {}
        self._memo: dict[str, str] = {}
        self.add(returns)

    def add(self, returns: Iterable[tuple[str, str]]) -> None:
        """More summaries (a deferred module parsed later in the run)."""
        for qualname, typ in returns:
            if qualname.endswith(GETTER) and self.written and (
                    qualname[:-len(GETTER)].rpartition(".")[2] in self.written):
                continue
            old = self.returns.get(qualname)
            self.returns[qualname] = typ if old is None or old == typ else AMBIGUOUS
        self._memo.clear()

    def resolve(self, name: str) -> str:
        """The furthest type ``name`` resolves to (``name`` itself when nothing is known);
        AMBIGUOUS when a step on the way is ambiguous."""
        return self._resolve(name, 0)

    def _resolve(self, name: str, depth: int) -> str:
        if name in self._memo:
            return self._memo[name]
        if depth > MAX_STEPS:
            return AMBIGUOUS
        self._memo[name] = AMBIGUOUS  # in progress: a cycle resolves to nothing
        out = name
        typ = self.returns.get(name)
        if typ == SELF_TYPE:
            out = self._resolve(name.rpartition(".")[0], depth + 1)
        elif typ is not None:
            out = typ if typ == AMBIGUOUS else self._resolve(typ, depth + 1)
        else:
            target = follow_reexport(name, self.reexports)
            if target is None and self.hierarchy:  # B.p where the getter is A.p, A a base
                target = next((c for c in self.hierarchy.inherited(name) if c in self.returns),
                              None)
                if target is not None and self.returns[target] == SELF_TYPE:
                    target = name.rpartition(".")[0]  # Sub.make from Base.make -> Self
            if target is None and name.endswith("]") and "[" in name:
                target = name[:name.rindex("[")]  # no TypedDict field: what T.get returns
            if target is not None:
                out = self._resolve(target, depth + 1)
            else:
                owner, _, attr = name.rpartition(".")
                if owner and "." in owner:  # a method of a value: pkg.make_store.put
                    base = self._resolve(owner, depth + 1)
                    if base == AMBIGUOUS:
                        out = AMBIGUOUS
                    elif base != owner:
                        out = self._resolve(f"{base}.{attr}", depth + 1)
        self._memo[name] = out
        return out

    def method(self, callee: str) -> str | None:
        """``T.m`` for a call ``x.m()`` named ``D.m`` on a deferred ``D`` that resolves to
        ``T``; None when ``D`` resolves to nothing new."""
        owner, _, attr = callee.rpartition(".")
        if not owner:
            return None
        base = self.resolve(owner)
        if base == AMBIGUOUS or base == owner:
            return None
        return f"{base}.{attr}"


def follow_reexport(name: str, reexports: Mapping[str, str]) -> str | None:
    """``pkg.f`` -> ``pkg.sub.f`` when ``pkg/__init__.py`` imports it (longest prefix)."""
    head, tail = name, ""
    while head:
        target = reexports.get(head)
        if target is not None and target != head and not target.startswith(f"{head}."):
            return target + tail
        head, _, last = head.rpartition(".")
        tail = f".{last}{tail}"
    return None
