"""Argument-sensitive summaries: the simple tests of a sync helper's parameters that guard
its blocking paths, and their value at a call site.

A helper that touches the disk only ``if key == REPORT_PATH`` does not block when it is
called with another constant key; one that reads netrc only ``if trust_env`` does not
block when called with the default ``trust_env=False``. Understood tests: ``p == C``,
``p != C``, ``p in (C, ...)``, ``p not in ...``, ``p is None``, ``p is not None``, ``p``,
``not p``, ``p is True``/``False``, ``C in p`` (a dict display's keys),
``isinstance(p, T)`` (builtin types and ``os.PathLike``), ``p.startswith(C)``,
their negations and ``and`` of them, on a parameter that the body never rebinds or rebinds
once under a guard that the call rules out (``rebinds``). ``self.x`` is a parameter of a
method too when only ``__init__`` and that method assign it: ``__init__``'s calls of
``self.m()`` pass the value it assigned. Anything else guards nothing, and an argument that
is not a constant is unknown: unknown keeps every path, so the summary stays sound the
other way.

Values are ``("v", constant)`` (a ``Kind`` when only the type is known: a dict display,
a module-level ``CONFIG = {...}``) or ``("s", qualified name)`` for a module-level constant
defined elsewhere, resolved project-wide; arguments can also be ``("p", name)``, a
parameter of the calling helper, passed through. A helper's ``**kwargs`` handed on whole
(``f(x, **kwargs)``) forwards the keywords its caller gave beyond its own parameters.
"""

from __future__ import annotations

import ast
import io
import ipaddress
import os
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from .records import compact_pickle

Value = tuple[str, object]
UNKNOWN: Value = ("?", None)
_NEGATE = {"==": "!=", "!=": "==", "in": "not in", "not in": "in", "truthy": "falsy",
           "falsy": "truthy", "is None": "is not None", "is not None": "is None",
           "isinstance": "not isinstance", "not isinstance": "isinstance",
           "startswith": "not startswith", "not startswith": "startswith",
           "any": "none", "none": "any", "is": "is not", "is not": "is",
           "has": "lacks", "lacks": "has", "address": "not address",
           "not address": "address"}
TYPES: dict[str, type] = {f"builtins.{t.__name__}": t for t in (
    str, bytes, int, float, bool, dict, list, tuple, set, frozenset, bytearray)}
TYPES["os.PathLike"] = os.PathLike
TYPES["types.FunctionType"] = types.FunctionType
TYPES["types.MethodType"] = types.MethodType
TYPES.update({f"io.{t.__name__}": t for t in (
    io.IOBase, io.RawIOBase, io.BufferedIOBase, io.TextIOBase, io.BytesIO, io.StringIO)})
FORWARD = "**"  # env key: the keywords a helper's **kwargs received
# env key: an event loop runs on this thread. Every chain the lint follows starts on the
# loop (an ``async def``, a loop callback), so chains set it True and a branch taken only
# when no loop runs is ruled out like one a constant argument rules out.
LOOP = "<running loop>"
RUNNING: Value = ("v", True)
# suffix of a constant registered for a helper that returns the running loop or None
# (``with suppress(RuntimeError): return asyncio.get_running_loop()``), project-wide
LOOP_GETTER = "#running-loop"
SELF = "self"  # keyword of a method call: the receiver's value
# env key: the chain's first call is awaited (``await f()``): a sync ``f`` that returns a
# coroutine in one arm and another call's result in the other takes the coroutine arm
AWAITED = "<awaited>"
ADDRESS = "address"  # op: the value parses as an IP address (address_probe.py)


@compact_pickle
@dataclass(frozen=True, slots=True)
class Kind:
    """A value whose type is known but not its content (``{...}``, ``[...]``); a dict
    display written at the call site also knows its constant ``keys``, a function named
    at the call site (``retry(save)``) the ``target`` def it is."""

    type: str
    keys: tuple[str, ...] | None = None
    target: str | None = None
    size: int | None = None  # items of a list / tuple / set display written at the call

    def truthy(self) -> bool | None:
        """Whether the value is true (a display's size says), or None."""
        if self.type == "builtins.dict" and self.keys is not None:
            return bool(self.keys)
        return None if self.size is None else self.size > 0

OPS = frozenset(_NEGATE)
_MISSING = object()


@compact_pickle
@dataclass(frozen=True, slots=True)
class Atom:
    """One test of one parameter."""

    param: str
    op: str
    values: tuple[Value, ...] = ()

    def negated(self) -> Atom:
        return Atom(self.param, _NEGATE[self.op], self.values)

    def holds(self, value: object, resolve: Callable[[Value], object]) -> bool | None:
        """Whether the test passes for ``value`` (None: cannot tell)."""
        op = self.op
        if op in ("isinstance", "not isinstance"):
            found = _isinstance(value, [str(v[1]) for v in self.values])
            return found if found is None or op == "isinstance" else not found
        if op in ("startswith", "not startswith"):
            prefixes = tuple(resolve(v) for v in self.values)
            if type(value) is not str or not all(type(c) is str for c in prefixes):
                return None
            return value.startswith(prefixes) == (op == "startswith")  # type: ignore[arg-type]
        if op in ("has", "lacks"):  # ``"k" in p``: the keys of a dict display
            if not isinstance(value, Kind) or value.keys is None:
                return None
            return (self.values[0][1] in value.keys) == (op == "has")
        if op in (ADDRESS, "not address"):
            return None if type(value) is not str else _address(value) == (op == ADDRESS)
        if isinstance(value, Kind):
            if op in ("truthy", "falsy"):
                true = value.truthy()
                return None if true is None else true == (op == "truthy")
            return {"is None": False, "is not None": True}.get(op)
        if op == "truthy":
            return bool(value)
        if op == "falsy":
            return not value
        if op == "is None":
            return value is None
        if op == "is not None":
            return value is not None
        if op in ("is", "is not"):  # ``p is True``: identity with a bool constant
            return (value is self.values[0][1]) == (op == "is")
        consts = [resolve(v) for v in self.values]
        if any(c is _MISSING for c in consts):
            return None
        if type(value) not in _SIMPLE or any(type(c) not in _SIMPLE for c in consts):
            return None
        inside = value in consts
        return inside if op in ("==", "in") else not inside


_SIMPLE = (str, int, bool, float, bytes, type(None))
Guard = tuple[Atom, ...]


def _address(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _isinstance(value: object, names: list[str]) -> bool | None:
    """``isinstance(value, names)`` for known types (None when it cannot be told)."""
    actual = TYPES.get(value.type) if isinstance(value, Kind) else type(value)
    if value is None:  # None is an instance of no class a project tests for
        return any(n in ("builtins.object", "types.NoneType") for n in names)
    if actual is None:
        return None
    known = [TYPES[n] for n in names if n in TYPES]
    if any(issubclass(actual, t) for t in known):
        return True
    return False if len(known) == len(names) else None


@compact_pickle
@dataclass(frozen=True, slots=True)
class Args:
    """A call's arguments as far as guards care; ``opaque`` with ``*a`` / ``**k``."""

    positional: tuple[Value, ...] = ()
    keywords: tuple[tuple[str, Value], ...] = ()
    opaque: bool = False
    forward: bool = False  # ``**kwargs`` of the calling helper handed on whole
    # ``**mapping`` of unknown content beside named keywords: those stay known (Python
    # refuses a duplicate), every other parameter is unknown, its default included
    more: bool = False


OPAQUE = Args(opaque=True)


def atoms(test: ast.expr, value_of: Callable[[ast.expr], Value],
          params: Iterable[str], type_of: Callable[[ast.expr], str | None] | None = None,
          self_name: str | None = None,
          aliases: Mapping[str, str] | None = None) -> Guard | None:
    """The conjunction ``test`` states about ``params``, or None when it is not understood.

    ``params`` may hold ``self.x`` entries, tested through ``self_name`` (the method's first
    parameter); ``aliases`` maps ``self.x`` to the parameter it holds (in ``__init__``);
    ``type_of`` names the type in ``isinstance(p, T)``."""
    names = set(params)

    def subject(node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return node.id if node.id in names else None
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and self_name is not None and node.value.id == self_name):
            key = f"self.{node.attr}"
            if aliases and key in aliases:
                return aliases[key]
            return key if key in names else None
        return None

    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        parts = [atoms(v, value_of, names, type_of, self_name, aliases) for v in test.values]
        if any(p is None for p in parts):
            return None
        return tuple(a for p in parts if p is not None for a in p)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        alts = [atoms(v, value_of, names, type_of, self_name, aliases) for v in test.values]
        if any(a is None or len(a) != 1 for a in alts):
            return None
        return (Atom("", "any", tuple(("a", a[0]) for a in alts if a is not None)),)
    if (isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
            and test.func.id == "bool" and len(test.args) == 1 and not test.keywords):
        return atoms(test.args[0], value_of, names, type_of, self_name, aliases)
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = atoms(test.operand, value_of, names, type_of, self_name, aliases)
        return (inner[0].negated(),) if inner is not None and len(inner) == 1 else None
    if (who := subject(test)) is not None:
        return (Atom(who, "truthy"),)
    if isinstance(test, ast.Call) and not test.keywords and len(test.args) in (1, 2):
        return _call_atom(test, subject, type_of)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if (isinstance(op, ast.In | ast.NotIn) and (who := subject(right)) is not None
            and isinstance(left, ast.Constant) and type(left.value) is str):
        return (Atom(who, "has" if isinstance(op, ast.In) else "lacks", (("v", left.value),)),)
    if subject(right) is not None and isinstance(op, ast.Eq | ast.NotEq):
        left, right = right, left
    who = subject(left)
    if who is None:
        return None
    none = isinstance(right, ast.Constant) and right.value is None
    if isinstance(op, ast.Is | ast.IsNot) and none:
        return (Atom(who, "is None" if isinstance(op, ast.Is) else "is not None"),)
    if (isinstance(op, ast.Is | ast.IsNot) and isinstance(right, ast.Constant)
            and type(right.value) is bool):
        return (Atom(who, "is" if isinstance(op, ast.Is) else "is not", (("v", right.value),)),)
    if isinstance(op, ast.Eq | ast.NotEq):
        value = value_of(right)
        return None if value == UNKNOWN else (Atom(who, "==" if isinstance(op, ast.Eq)
                                                   else "!=", (value,)),)
    if isinstance(op, ast.In | ast.NotIn):
        if isinstance(right, ast.Tuple | ast.List | ast.Set):
            values = tuple(value_of(e) for e in right.elts)
        else:  # a module-level tuple of constants
            whole = value_of(right)
            if whole[0] != "v" or not isinstance(whole[1], tuple):
                return None
            values = tuple(("v", v) for v in whole[1])
        if UNKNOWN in values:
            return None
        return (Atom(who, "in" if isinstance(op, ast.In) else "not in", values),)
    return None


def _call_atom(test: ast.Call, subject: Callable[[ast.expr], str | None],
               type_of: Callable[[ast.expr], str | None] | None) -> Guard | None:
    """``isinstance(p, T | (T, ...))`` and ``p.startswith(C | (C, ...))``."""
    func = test.func
    if (isinstance(func, ast.Name) and func.id == "isinstance" and len(test.args) == 2
            and type_of is not None and (who := subject(test.args[0])) is not None):
        spec = test.args[1]
        parts = spec.elts if isinstance(spec, ast.Tuple) else [spec]
        types = [type_of(t) for t in parts]
        if not types or any(t is None for t in types):
            return None
        return (Atom(who, "isinstance", tuple(("t", t) for t in types)),)
    if (isinstance(func, ast.Attribute) and func.attr == "startswith" and len(test.args) == 1
            and (who := subject(func.value)) is not None):
        spec = test.args[0]
        parts = spec.elts if isinstance(spec, ast.Tuple) else [spec]
        if not parts or not all(isinstance(c, ast.Constant) and type(c.value) is str
                                for c in parts):
            return None
        return (Atom(who, "startswith",
                     tuple(("v", c.value) for c in parts if isinstance(c, ast.Constant))),)
    return None


def bind(args: Args | None, params: tuple[str, ...], names: frozenset[str],
         defaults: Mapping[str, Value], outer: Mapping[str, Value],
         varkw: bool = False) -> dict[str, Value]:
    """Known parameter values of a call: arguments, else defaults; ``("p", x)`` arguments
    take the caller's known value of ``x`` from ``outer``. With ``varkw`` (the callee has
    ``**kwargs``) the keywords beyond ``names`` are kept under ``FORWARD``."""
    if args is None or args.opaque:
        return {}
    keywords = args.keywords
    if args.forward:
        extra = outer.get(FORWARD)
        if extra is None:
            return {}  # what the caller's **kwargs held is not known
        keywords = (*keywords, *extra[1])  # type: ignore[misc]
    env: dict[str, Value] = {} if args.more else dict(defaults)
    given = dict(zip(params, args.positional, strict=False))
    given.update((k, v) for k, v in keywords if k in names)
    for name, value in given.items():
        if value[0] == "p":
            value = outer.get(str(value[1]), UNKNOWN)
        elif value[0] == "i":
            value = close(value, outer)
        if value == UNKNOWN:
            env.pop(name, None)
        else:
            env[name] = value
    if varkw and not args.more:
        extras = []
        for k, v in keywords:
            if k not in names:
                extras.append((k, outer.get(str(v[1]), UNKNOWN) if v[0] == "p" else v))
        env[FORWARD] = ("x", tuple(extras))
    return env


def instance(value: Value) -> tuple[str, Args]:
    """The (class, arguments) of an ``("i", ...)`` value."""
    payload = value[1]
    assert isinstance(payload, tuple) and len(payload) == 2
    cls: object = payload[0]
    args: object = payload[1]
    assert isinstance(cls, str) and isinstance(args, Args)
    return cls, args


def close(value: Value, outer: Mapping[str, Value]) -> Value:
    """An instance ``("i", (class, Args))`` built by the caller, its arguments read in the
    caller's ``outer`` values (``"p"`` and forwarded keywords resolved)."""
    cls, args = instance(value)
    if args.opaque or (args.forward and FORWARD not in outer):
        return ("i", (cls, OPAQUE))

    def fix(v: Value) -> Value:
        return outer.get(str(v[1]), UNKNOWN) if v[0] == "p" else v

    keywords = tuple((k, fix(v)) for k, v in args.keywords)
    if args.forward:
        keywords += outer[FORWARD][1]  # type: ignore[operator]
    return ("i", (cls, Args(tuple(fix(v) for v in args.positional), keywords,
                            more=args.more)))


def ruled_out(guard: Guard, env: Mapping[str, Value],
              resolve: Callable[[Value], object],
              rebinds: Mapping[str, Guard] | None = None) -> bool:
    """True when a known argument makes one of the guard's tests false. A parameter that
    the body rebinds (``rebinds``: the guard of its one assignment) is only trusted when
    that assignment is itself ruled out."""
    for atom in guard:
        if atom.op in ("any", "none"):  # ``a or b or ...`` and its negation
            subs = [v[1] for v in atom.values]
            if atom.op == "any" and all(ruled_out(_conjunction(a), env, resolve, rebinds)
                                        for a in subs):
                return True
            if atom.op == "none" and any(ruled_out((a.negated(),), env, resolve, rebinds)
                                         for a in subs if isinstance(a, Atom)):
                return True
            continue
        value = env.get(atom.param)
        if value is None:
            continue
        if rebinds and atom.param in rebinds and not _stays(atom.param, env, resolve,
                                                            rebinds):
            continue
        actual = resolve(value)
        if actual is _MISSING:
            continue
        if atom.holds(actual, resolve) is False:
            return True
    return False


def _conjunction(alt: object) -> Guard:
    """An alternative of an ``any`` test as a guard: one test, or a whole conjunction."""
    if isinstance(alt, Atom):
        return (alt,)
    assert isinstance(alt, tuple)
    return alt


def either(first: Guard, then: Guard) -> Guard:
    """The guard under which one of several assignments runs: ruled out only when each
    assignment's own guard is (``if p is True: p = a() / elif ...: p = b()``)."""
    alts: tuple[Value, ...] = ((CONJ, first),)
    if len(first) == 1 and first[0].op == "any" and first[0].values[0][0] == CONJ:
        alts = first[0].values
    return (Atom("", "any", (*alts, (CONJ, then))),)


CONJ = "c"  # a Value holding a whole guard (an alternative of ``either``)


def _stays(param: str, env: Mapping[str, Value], resolve: Callable[[Value], object],
           rebinds: Mapping[str, Guard]) -> bool:
    """Whether the one assignment to ``param`` cannot run with these arguments (its guard
    is read on parameters that are never rebound, or on ``param`` itself: the test runs
    before the assignment)."""
    return ruled_out(_usable(rebinds[param], param, rebinds), env, resolve)


def _usable(guard: Guard, param: str, rebinds: Mapping[str, Guard]) -> Guard:
    """The tests of ``guard`` read on ``param`` or on parameters never rebound (a
    conjunction with fewer tests is ruled out less often: still sound)."""
    out = []
    for a in guard:
        if a.op == "any" and a.values and a.values[0][0] == CONJ:
            alts = tuple((CONJ, _usable(_conjunction(v[1]), param, rebinds))
                         for v in a.values)
            out.append(Atom("", "any", alts))
        elif a.param == param or a.param not in rebinds:
            out.append(a)
    return tuple(out)


def resolver(constants: Mapping[str, object]) -> Callable[[Value], object]:
    """Turn a Value into a Python constant (``MISSING`` when it cannot be known)."""
    def resolve(value: Value) -> object:
        kind, payload = value
        if kind == "v":
            return payload
        if kind == "s":
            return constants.get(str(payload), _MISSING)
        return _MISSING
    return resolve


MISSING = _MISSING
