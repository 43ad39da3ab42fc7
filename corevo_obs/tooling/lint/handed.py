"""Sync functions handed to a function of the tree that calls them on the loop:
``await self._with_retry(self._count)``, where ``_with_retry`` is an ``async def`` doing
``return operation()``.

The scan keeps both halves: ``ParamCall`` (code on the loop calling its own parameter)
and ``FileResult.hands`` (a call on the loop passing a def of the tree). The run binds
each hand's arguments to the callee's parameters; a def bound to a called parameter runs
on the loop at that call, which is where the finding goes, since the fix goes there
(``await asyncio.to_thread(operation)``)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import replace

from .hierarchy import Hierarchy
from .model import CallSite, FileResult, ParamCall
from .narrowing import Args, Kind, Value, bind

Candidate = tuple[CallSite, tuple[str, str]]  # the call with the handed def, (param, where)


def handed_calls(results: Iterable[FileResult], own: set[str],
                 hierarchy: Hierarchy) -> Iterator[list[Candidate]]:
    """Per parameter call in the tree's own files, the calls it makes with each def handed
    to it, in the order of the hands (path, line): the first that blocks is the finding."""
    done = list(results)
    calls: dict[str, list[ParamCall]] = {}
    for r in done:
        if r.path in own:
            for pc in r.param_calls:
                calls.setdefault(pc.func, []).append(pc)
    if not calls:
        return
    found: dict[tuple[str, int, int], list[tuple[tuple[str, int, int], Candidate]]] = {}
    for r in done:
        for hand in r.hands:
            for pc in calls.get(_definer(hand.callee, calls, hierarchy), ()):
                def_ = target(bind(hand.args, pc.params, pc.names, {}, {}).get(pc.param))
                if def_ is None:
                    continue
                where = f"handed in at {os.path.basename(hand.path)}:{hand.line}"
                key = (pc.site.path, pc.site.line, pc.site.col)
                found.setdefault(key, []).append(((hand.path, hand.line, hand.col), (
                    replace(pc.site, callee=def_), (pc.param, where))))
    for key in sorted(found):
        yield [c for _, c in sorted(found[key], key=lambda item: item[0])]


def handed_targets(results: Iterable[FileResult]) -> list[str]:
    """The defs handed by calls on the loop: a module without ``async`` that holds one is
    read, as for a call's callee."""
    return [t for r in results for hand in r.hands for t in defs_named(hand.args)]


def defs_named(args: Args | None) -> Iterator[str]:
    """The defs a call's arguments name (``target``)."""
    if args is not None:
        for value in (*args.positional, *(v for _, v in args.keywords)):
            if (t := target(value)) is not None:
                yield t


def target(value: Value | None) -> str | None:
    """The def a value names: one of the file (``Kind.target``) or an imported name
    (``("s", qualname)``; the run's index tells whether it is a function)."""
    if value is None:
        return None
    if value[0] == "s":
        return str(value[1])
    return value[1].target if isinstance(value[1], Kind) else None


def _definer(callee: str, calls: dict[str, list[ParamCall]], hierarchy: Hierarchy) -> str:
    """``C.m`` -> ``B.m`` when ``m`` is inherited from ``B`` (the nearest class of ``C``'s
    MRO that binds ``m`` and calls a parameter in it), else ``callee``."""
    callee = hierarchy.defining(callee)
    if callee in calls:
        return callee
    owner, _, attr = callee.rpartition(".")
    for cls in hierarchy.mro(owner) if owner and hierarchy else ():
        if f"{cls}.{attr}" in calls:
            return f"{cls}.{attr}"
        if attr in hierarchy.shadows.get(cls, ()):
            break  # bound there by something that calls no parameter
    return callee
