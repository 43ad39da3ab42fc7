"""Argument-sensitive summaries: the simple tests of a sync helper's parameters that guard
its blocking paths, and their value at a call site.

A helper that touches the disk only ``if key == REPORT_PATH`` does not block when it is
called with another constant key; one that reads netrc only ``if trust_env`` does not
block when called with the default ``trust_env=False``. Understood tests: ``p == C``,
``p != C``, ``p in (C, ...)``, ``p not in ...``, ``p is None``, ``p is not None``, ``p``,
``not p`` and ``and`` of them, on a parameter that the body never rebinds. Anything else
guards nothing, and an argument that is not a constant is unknown: unknown keeps every
path, so the summary stays sound the other way.

Values are ``("v", constant)`` or ``("s", qualified name)`` for a module-level constant
defined elsewhere, resolved project-wide; arguments can also be ``("p", name)``, a
parameter of the calling helper, passed through.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

Value = tuple[str, object]
UNKNOWN: Value = ("?", None)
_NEGATE = {"==": "!=", "!=": "==", "in": "not in", "not in": "in", "truthy": "falsy",
           "falsy": "truthy", "is None": "is not None", "is not None": "is None"}
OPS = frozenset(_NEGATE)
_MISSING = object()


@dataclass(frozen=True)
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
        if op == "truthy":
            return bool(value)
        if op == "falsy":
            return not value
        if op == "is None":
            return value is None
        if op == "is not None":
            return value is not None
        consts = [resolve(v) for v in self.values]
        if any(c is _MISSING for c in consts):
            return None
        if type(value) not in _SIMPLE or any(type(c) not in _SIMPLE for c in consts):
            return None
        inside = value in consts
        return inside if op in ("==", "in") else not inside


_SIMPLE = (str, int, bool, float, bytes, type(None))
Guard = tuple[Atom, ...]


@dataclass(frozen=True)
class Args:
    """A call's arguments as far as guards care; ``opaque`` with ``*a`` / ``**k``."""

    positional: tuple[Value, ...] = ()
    keywords: tuple[tuple[str, Value], ...] = ()
    opaque: bool = False


OPAQUE = Args(opaque=True)


def atoms(test: ast.expr, value_of: Callable[[ast.expr], Value],
          params: Iterable[str]) -> Guard | None:
    """The conjunction ``test`` states about ``params``, or None when it is not understood."""
    names = set(params)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        parts = [atoms(v, value_of, names) for v in test.values]
        if any(p is None for p in parts):
            return None
        return tuple(a for p in parts if p is not None for a in p)
    if isinstance(test, ast.Name) and test.id in names:
        return (Atom(test.id, "truthy"),)
    if (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
            and isinstance(test.operand, ast.Name) and test.operand.id in names):
        return (Atom(test.operand.id, "falsy"),)
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1):
        return None
    left, op, right = test.left, test.ops[0], test.comparators[0]
    if isinstance(right, ast.Name) and right.id in names and isinstance(op, ast.Eq | ast.NotEq):
        left, right = right, left
    if not (isinstance(left, ast.Name) and left.id in names):
        return None
    none = isinstance(right, ast.Constant) and right.value is None
    if isinstance(op, ast.Is | ast.IsNot) and none:
        return (Atom(left.id, "is None" if isinstance(op, ast.Is) else "is not None"),)
    if isinstance(op, ast.Eq | ast.NotEq):
        value = value_of(right)
        return None if value == UNKNOWN else (Atom(left.id, "==" if isinstance(op, ast.Eq)
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
        return (Atom(left.id, "in" if isinstance(op, ast.In) else "not in", values),)
    return None


def bind(args: Args | None, params: tuple[str, ...], names: frozenset[str],
         defaults: Mapping[str, Value], outer: Mapping[str, Value]) -> dict[str, Value]:
    """Known parameter values of a call: arguments, else defaults; ``("p", x)`` arguments
    take the caller's known value of ``x`` from ``outer``."""
    if args is None or args.opaque:
        return {}
    env: dict[str, Value] = dict(defaults)
    given = dict(zip(params, args.positional, strict=False))
    given.update((k, v) for k, v in args.keywords if k in names)
    for name, value in given.items():
        if value[0] == "p":
            value = outer.get(str(value[1]), UNKNOWN)
        if value == UNKNOWN:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def ruled_out(guard: Guard, env: Mapping[str, Value],
              resolve: Callable[[Value], object]) -> bool:
    """True when a known argument makes one of the guard's tests false."""
    for atom in guard:
        value = env.get(atom.param)
        if value is None:
            continue
        actual = resolve(value)
        if actual is _MISSING:
            continue
        if atom.holds(actual, resolve) is False:
            return True
    return False


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
