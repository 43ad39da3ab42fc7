"""COB110: an ``async def`` calls a sync function of the linted tree that blocks,
directly or through further sync helpers; the message carries the whole chain
(``persist_artifact -> _write_blob -> open()``).

Only unambiguous resolutions form edges: a name bound twice, a qualified name defined in
two files, or a call through an untyped object makes no edge, so precision stays high.
A path guarded by a test of a parameter that the call's constant or default arguments make
false is not followed (``guards.py``). A direct call of a ``@blocking`` function is COB111
instead.
"""

from __future__ import annotations

import os
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..imports import Ref
from ..model import FIRST_CALL, FIRST_USE, GUESSED, READ, UNNAMED, CallSite, FuncFacts
from ..narrowing import (
    AWAITED,
    LOOP,
    RUNNING,
    SELF,
    UNKNOWN,
    Args,
    Kind,
    Value,
    bind,
    instance,
    resolver,
    ruled_out,
)
from ..returns import ReturnTypes, follow_reexport
from . import catalogued, declared
from .base import Family, Spec, chain_text, register

if TYPE_CHECKING:
    from ..call_catalog import Catalog
    from ..hierarchy import Hierarchy

CODE = "COB110"
MAX_REEXPORT_HOPS = 4
MAX_SUBCLASSES = 256  # implementations of an abstract method looked at
TEST_DIRS = frozenset({"tests", "test", "testing"})
NOT_NONE = Kind("builtins.object")  # an instance: not None, nothing else known
MAX_ARG_DEPTH = 16  # call depth past which arguments are no longer read (sound: all paths)
# the next hop of a chain: callee, its arguments, the caller's environment, depth, quiet
# hints, and the class of ``self`` when the callee is a method called on it
Hop = tuple[str, Args | None, Mapping[str, Value] | None, int, frozenset[str], str | None]
# what a call on the loop amounts to: code, message fields, confidence, files on its chain
Verdict = tuple[str, dict[str, str], str, tuple[str, ...], str]
OBSERVED = "[seen blocking at run time]"  # the end of a chain to an observed fact


@dataclass(frozen=True)
class Chain:
    """A blocking chain: the hops' names ending in the call that blocks, the files the hops
    are written in, and whether its end blocks only on first use (then the finding is
    ``low``)."""

    names: tuple[str, ...]
    paths: tuple[str, ...] = ()
    low: bool = False
    source: str = ""  # the observed stall a run-time fact came from (``observed.py``)

    def after(self, name: str, path: str, low: bool = False) -> Chain:
        """The chain one hop up; ``low``: that hop runs once per process (a memo)."""
        return Chain((name, *self.names), (path, *self.paths), self.low or low, self.source)


@register
class BlockingChains(Family):
    family = "chains"
    error_codes = {
        CODE: Spec("blocking-chain",
                   "An async def calls a sync helper of the tree that blocks, maybe via others.",
                   "{call} blocks inside async def {func}: {chain}"),
    }


class ChainIndex:
    """Every sync function of the tree by qualified name, with memoised blocking chains."""

    def __init__(self, funcs: Iterable[tuple[str, FuncFacts]],
                 reexports: dict[str, str] | None = None,
                 constants: Mapping[str, object] | None = None,
                 written: Iterable[str] = (), types: ReturnTypes | None = None,
                 catalog: Catalog | None = None,
                 hierarchy: Hierarchy | None = None) -> None:
        self.reexports = reexports or {}
        self.hierarchy = hierarchy  # methods a class inherits are looked up through it
        self._children: dict[str, list[str]] | None = None  # class -> its direct subclasses
        self.types = types  # receivers typed by helpers' results (returns.py)
        self.catalog = catalog  # to classify a method once its receiver's type is known
        self.written = frozenset(written)  # obj.x = ... somewhere: x is no known state
        # the linted directories: a file's test-ness is read from its path below them
        self.bases: tuple[str, ...] = ()
        self._tests: dict[str, bool] = {}
        self._constant = resolver(constants or {})
        self.funcs: dict[str, FuncFacts] = {}
        dup: set[str] = set()
        for qualname, facts in funcs:
            if qualname in self.funcs:
                dup.add(qualname)
            self.funcs[qualname] = facts
        for qualname in dup:
            del self.funcs[qualname]
        self._memo: dict[tuple[str, str | None, tuple[tuple[str, Value], ...]],
                         Chain | None] = {}
        self._observed: dict[int, str] = {}  # id(facts) -> citation of a stall seen in it

    def observe(self, cites: Mapping[str, str]) -> None:
        """Functions seen blocking at run time (``observed.py``): each is a blocking fact,
        cited by the findings whose chain ends in it."""
        self._observed.update((id(self.funcs[q]), c) for q, c in cites.items() if q in self.funcs)
        self._memo.clear()

    def _resolve(self, value: Value) -> object:
        """A Value's constant; an object built by calling a class of the tree is at least
        known not to be None."""
        if value[0] == "i" and self.funcs.get(f"{instance(value)[0]}.__init__") is not None:
            return NOT_NONE
        return self._constant(value)

    def lookup(self, qualname: str) -> FuncFacts | None:
        """The function a name calls: itself, a class's ``__init__``, through re-exports,
        else a method (or ``__init__``) the class inherits from a base of the tree."""
        found = self.locate(qualname)
        return found[2] if found is not None else None

    def locate(self, qualname: str) -> tuple[str, str, FuncFacts] | None:
        """``lookup`` with where it was found: (the class of ``self`` in that call, the
        qualified name of the function that runs, its facts)."""
        for _ in range(MAX_REEXPORT_HOPS):
            facts = self.funcs.get(qualname)
            if facts is not None:
                return qualname.rpartition(".")[0], qualname, facts
            facts = self.funcs.get(f"{qualname}.__init__")  # a class call runs __init__
            if facts is not None:
                return qualname, f"{qualname}.__init__", facts
            target = follow_reexport(qualname, self.reexports)
            if target is None:
                break
            qualname = target
        if self.hierarchy:
            for name, owner in ((qualname, qualname.rpartition(".")[0]),
                                (f"{qualname}.__init__", qualname)):
                for base in self.hierarchy.inherited(name):
                    facts = self.funcs.get(base)
                    if facts is not None:
                        return self.hierarchy.defining(owner), base, facts
        return None

    def dispatch(self, callee: str, runs: str, me: str | None) -> tuple[str, str | None]:
        """A call made in the method ``runs`` on an object of class ``me``: ``self.m()``
        (``callee`` is ``m`` on the method's own class) runs ``me``'s ``m`` (an override
        in a subclass), and ``self`` stays that object; any other call starts afresh."""
        owner = runs.rpartition(".")[0]
        if me is None or not owner:
            return callee, None
        if not callee.startswith(owner + "."):
            # super().m() / Base.m(self): the base's m, on the same object
            base, _, attr = callee.rpartition(".")
            if self.hierarchy and base in self.hierarchy.mro(owner)[1:]:
                return callee, me
            return callee, None
        attr = callee[len(owner) + 1:]
        if "." in attr:
            return callee, None
        if me != owner and self.lookup(f"{me}.{attr}") is not None:
            return f"{me}.{attr}", me
        return callee, me

    def retyped(self, callee: str) -> str | None:
        """``T.m`` for ``D.m`` called on a value of deferred type ``D`` that resolves to
        ``T`` (``make_client().get`` -> ``httpx.Client.get``), else None."""
        if self.types is None:
            return None
        target = self.types.method(callee)
        if target is None and self.hierarchy:  # a library method a tree class inherits
            target = next((b for name in (callee, f"{callee}.__init__")
                           for b in self.hierarchy.inherited(name)
                           if self.catalogued(b, frozenset(), direct=True) is not None), None)
        if target is None or (self.catalog is not None
                              and self.catalog.is_non_blocking(target)):
            return None
        return target

    def getter(self, read: str) -> str | None:
        """The property getter a read ``x.p`` (``T.p#read``) runs, if ``p`` resolves to
        one; a plain attribute, a method read as a value, or an unknown name runs nothing."""
        name = read[:-len(READ)]
        for candidate in (name, self.retyped(name)):
            facts = self.lookup(candidate) if candidate is not None else None
            if facts is not None:
                return candidate if facts.getter else None
        return None

    def catalogued(self, target: str, quiet: frozenset[str],
                   direct: bool) -> tuple[str, str, dict[str, str]] | None:
        """(code, display, extra) when the resolved method ``target`` is a catalogued or
        configured blocking call that these hints do not disarm."""
        if self.catalog is None:
            return None
        owner, _, attr = target.rpartition(".")
        ref = catalogued.base_constructor(Ref(target, "method", type=owner, attr=attr),
                                          self.catalog)
        hit = declared.configured(ref, self.catalog) or catalogued.classify(ref, self.catalog)
        if hit is None or catalogued.quieted(ref.name, quiet, self.catalog):
            return None
        if not direct and target in self.catalog.first_use:
            mark = FIRST_CALL if target in self.catalog.per_process else FIRST_USE
            return hit[0], hit[1] + mark, hit[2]
        return hit

    def chain(self, qualname: str, args: Args | None = None,
              outer: Mapping[str, Value] | None = None, depth: int = 0,
              quiet: frozenset[str] = frozenset(), me: str | None = None,
              awaited: bool = False) -> Chain | None:
        """``(name, ..., "open()")`` when calling ``qualname`` with ``args`` blocks, else None.
        ``awaited``: the caller awaits this first call's result.

        Driven as a trampoline over ``_step`` generators, one per hop, so a sync chain of any
        depth (``g0 -> ... -> g3000 -> time.sleep``) needs no Python stack per hop."""
        stack = [self._step(qualname, args, outer, depth, quiet, me, awaited)]
        value: Chain | None = None
        while stack:
            try:
                hop = stack[-1].send(value)
            except StopIteration as done:
                stack.pop()
                value = done.value
                continue
            stack.append(self._step(*hop))
            value = None
        return value

    def _step(self, qualname: str, args: Args | None, outer: Mapping[str, Value] | None,
              depth: int, quiet: frozenset[str], me: str | None,
              awaited: bool = False) -> Generator[Hop, Chain | None, Chain | None]:
        """One hop of ``chain``: yields the next hop to follow and receives its chain.
        ``me``: the class of the object a ``self.m()`` hop is called on (``dispatch``)."""
        if qualname.endswith(READ):
            getter = self.getter(qualname)
            return None if getter is None else (yield (getter, None, outer, depth, quiet, None))
        found = self.locate(qualname)
        if found is None:
            target = self.retyped(qualname)
            if target is None:
                return None
            if self.lookup(target) is not None:
                return (yield (target, args, outer, depth, quiet, None))
            hit = self.catalogued(target, quiet, direct=False)
            return Chain((hit[1],), (), hit[1].endswith(GUESSED)) if hit is not None else None
        owner, runs, facts = found
        if facts.wrapped and self.threaded(facts):
            return None  # a decorator of another module runs it in a thread
        me = me or owner  # the object's class: a subclass's when called on one
        if depth > MAX_ARG_DEPTH:  # values may grow down a recursion: stop reading them
            args, outer = None, None
        env = bind(args, facts.params, facts.names, facts.defaults, outer or {}, facts.varkw)
        receiver = env.pop(SELF, None)
        if receiver is not None and receiver[0] == "i":
            self._state(receiver, facts, env)
        env[LOOP] = RUNNING  # the chain runs on the loop's thread: a loop runs
        if awaited:
            env[AWAITED] = RUNNING  # its result must be awaitable: a dispatcher's coroutine
        key = (qualname, me, tuple(sorted(env.items(), key=lambda kv: kv[0])))
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = None  # in progress: a cycle adds no evidence
        result: Chain | None = None
        if facts.marked:
            result = Chain((f"{facts.name}() [@blocking]",), (facts.path,))
        else:
            # a block on every call wins over a first-use loader (a stable sort)
            for call, guard in sorted(facts.blocks, key=lambda b: b[0].endswith(GUESSED)):
                if not ruled_out(guard, env, self._resolve, facts.rebinds):
                    result = Chain((facts.name, call), (facts.path,), call.endswith(GUESSED))
                    break
            if result is None and id(facts) in self._observed:
                result = Chain((facts.name, OBSERVED), (facts.path,),
                               source=self._observed[id(facts)])
            if result is None:
                for edge in facts.edges:
                    if ruled_out(edge.guard, env, self._resolve, facts.rebinds):
                        continue
                    callee, on = self.dispatch(edge.callee, runs, me)
                    sub = yield (callee, edge.args, env, depth + 1, edge.quiet, on)
                    if sub is not None:
                        result = sub.after(facts.name, facts.path, low=edge.once)
                        break
        self._memo[key] = result
        return result

    def _implemented(self, callee: str, facts: FuncFacts, site: CallSite) -> Verdict | None:
        """A call of an abstract method: the project's subclasses implement it, and which
        one the object is, is a guess: the first implementation that blocks is reported,
        at medium confidence (low when the site's own entry is a guess)."""
        owner, _, attr = callee.rpartition(".")
        doubles = not self.in_tests(site.path)  # library code never runs a test's double
        for sub in self._subclasses(owner):
            impl = f"{sub}.{attr}"
            if impl not in self.funcs or (self.lookup(impl) or facts).abstract:
                continue
            if doubles and (".<locals>." in sub or self.in_tests(self.funcs[impl].path)):
                continue
            chain = self.chain(impl, site.args)
            if chain is not None:
                names = [f"{facts.name} [abstract]", *chain.names]
                return (CODE, {"call": f"{facts.name}()", "func": site.func,
                               "chain": chain_text(site.func, names)},
                        "low" if chain.low or site.low else "medium",
                        (facts.path, *chain.paths), chain.source)
        return None

    def in_tests(self, path: str) -> bool:
        """A test module: below the linted directory that holds it, a ``tests`` / ``test``
        / ``testing`` directory, or a ``test_*.py`` / ``*_test.py`` / ``conftest.py`` file
        (a file outside them is read on its whole path)."""
        found = self._tests.get(path)
        if found is None:
            full = os.path.abspath(path)
            holding = [b for b in self.bases if full.startswith(b + os.sep)]
            rest = full[len(max(holding, key=len)) + 1:] if holding else full
            *dirs, name = rest.split(os.sep)
            stem = name.removesuffix(".py")
            found = self._tests[path] = (
                any(d in TEST_DIRS for d in dirs) or stem == "conftest"
                or stem.startswith("test_") or stem.endswith("_test"))
        return found

    def _subclasses(self, cls: str) -> list[str]:
        """The classes of the run whose bases include ``cls``, at any depth, nearest first
        (a few hundred at most)."""
        if self.hierarchy is None:
            return []
        if self._children is None:
            self._children = {}
            for child, bases in self.hierarchy.bases.items():
                for base in bases:
                    self._children.setdefault(self.hierarchy.defining(base), []).append(child)
        out: list[str] = []
        todo = list(self._children.get(cls, ()))
        while todo and len(out) < MAX_SUBCLASSES:
            child = todo.pop(0)
            if child not in out:
                out.append(child)
                todo.extend(self._children.get(child, ()))
        return out

    def _state(self, receiver: Value, facts: FuncFacts, env: dict[str, Value]) -> None:
        """A method called on an object built with known arguments: its ``self.x`` are
        what the class's ``__init__`` assigned from them (guards.py)."""
        cls, args = instance(receiver)
        init = self.funcs.get(f"{cls}.__init__")
        if init is None or args.opaque:
            return
        ienv = bind(args, init.params, init.names, init.defaults, {}, init.varkw)
        for key, value in init.inits.items():
            if key not in facts.names or key in env or key[5:] in self.written:
                continue
            if value[0] == "p":
                value = ienv.get(str(value[1]), UNKNOWN)
            if value != UNKNOWN:
                env[key] = value

    def classify(self, site: CallSite, handed: tuple[str, str] | None = None
                 ) -> Verdict | None:
        """(code, message fields, confidence, files on the chain) for a call made on the
        loop, or None if it does not block. ``handed``: (parameter, where) when the site
        is a call of a parameter and its callee the def a caller handed in there."""
        callee = site.callee
        inferred = False
        if callee.endswith(READ):
            getter = self.getter(callee)
            if getter is None:
                return None
            callee = getter
        if self.lookup(callee) is None:
            target = self.retyped(callee)
            if target is None:
                return None
            if self.lookup(target) is None:  # a library type: the catalog decides
                if site.awaited and (self.catalog is None
                                     or target not in self.catalog.awaited_blocking):
                    # a sync method's result is no awaitable: the receiver's class makes
                    # it one (jupyterhub's requests.Session whose request() goes to a
                    # thread pool), as an awaited catalogued call in one file (scan.py)
                    return None
                hit = self.catalogued(target, site.quiet, direct=True)
                if hit is None:
                    return None
                code, display, extra = hit
                return code, {"call": display, "func": site.func, **extra}, "medium", (), ""
            callee, inferred = target, True
        chain = self.chain(callee, site.args, awaited=site.awaited)
        facts = self.lookup(callee)
        if chain is None and facts is not None and facts.abstract:
            return self._implemented(callee, facts, site)
        if chain is None or facts is None:
            return None
        call = facts.name if facts.getter else f"{facts.name}()"
        if facts.marked:
            return (declared.CODE, {"call": call, "func": site.func, "why": declared.MARKER},
                    "medium" if inferred else "high", chain.paths, "")
        names = list(chain.names)
        unread = self.unread(facts) if site.awaited else None
        if unread is not None:  # awaited: its decorator made it awaitable, most likely by
            names[0] = f"{names[0]} [awaited, {unread}]"  # running it in a thread: a guess
        if handed is not None:
            call, names[0] = f"{handed[0]}()", f"{handed[0]} [{names[0]}, {handed[1]}]"
        confidence = "low" if chain.low or site.low or unread is not None else "medium"
        return (CODE, {"call": call, "func": site.func,
                       "chain": chain_text(site.func, names)},
                confidence, chain.paths, chain.source)

    def threaded(self, facts: FuncFacts) -> bool:
        """A decorator of the def is a def of the run whose code hands the function it is
        given to a thread or an offload (read from its ``def`` in its own module)."""
        return any((deco := self.lookup(name)) is not None and deco.threads
                   for name in facts.wrapped if name != UNNAMED)

    def unread(self, facts: FuncFacts) -> str | None:
        """A decorator of a sync def whose code the run does not have (a dependency's, not
        installed or not followed), shown as ``@name``; None when every decorator is read
        or known. Awaiting such a def's result works only if the decorator made it
        awaitable, and the decorators that do so for a plain def (aiomisc's ``threaded``,
        asyncer's ``asyncify``, asgiref's ``sync_to_async``) run its body in a thread."""
        for name in facts.wrapped:
            if name == UNNAMED or self.lookup(name) is None:
                return "@" + name.rpartition(".")[2] if name != UNNAMED else "decorated"
        return None
