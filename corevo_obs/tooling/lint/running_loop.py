"""Tests of whether an event loop runs on this thread, as guards (``narrowing.LOOP``).

A sync helper that attaches to the running loop when there is one and only otherwise
starts a thread and waits for it (``if loop: ...; return`` then ``Event().wait()``) does
not block when called from a coroutine: a loop runs there by definition. Understood, in
an ``if`` test or an early exit: ``asyncio._get_running_loop()``,
``asyncio.get_event_loop().is_running()``, a call of a project helper that returns
``asyncio.get_running_loop()`` or None (``with suppress(RuntimeError)``, or
``try``/``except RuntimeError``; registered project-wide as a constant), ``None if C else
<one of these>`` (and ``<...> if C else None``), a name or ``self.x`` bound once in the
function to one of these (or by ``try: x = asyncio.get_running_loop()`` / ``except
RuntimeError: x = None``), with ``not``, ``is None`` and ``is not None``; and the ``except
RuntimeError`` clause of a ``try`` whose body is only ``asyncio.get_running_loop()``.
``loop.is_running()`` on any other loop says nothing: that loop need not be this thread's.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from .imports import Ref, is_none
from .narrowing import LOOP, LOOP_GETTER, Atom, Guard

NONE_OUTSIDE = frozenset({"asyncio._get_running_loop", "asyncio.events._get_running_loop"})
RAISES_OUTSIDE = frozenset({"asyncio.get_running_loop", "asyncio.events.get_running_loop"})
CURRENT = frozenset({"asyncio.get_event_loop", "asyncio.events.get_event_loop"})
NEEDLE = b"running"  # every understood test spells it (``get_running_loop``, ``is_running``)

Resolve = Callable[[ast.expr], Ref | None]


def _named(node: ast.expr, resolve: Resolve, names: frozenset[str]) -> bool:
    if not (isinstance(node, ast.Call) and not node.args and not node.keywords):
        return False
    ref = resolve(node.func)
    return ref is not None and ref.name in names


def is_getter(node: ast.FunctionDef | ast.AsyncFunctionDef, resolve: Resolve) -> bool:
    """A function without parameters that returns the running loop, or None when no loop
    runs (it never raises for want of one)."""
    args = node.args
    if isinstance(node, ast.AsyncFunctionDef) or args.args or args.posonlyargs or args.vararg:
        return False
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if (len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None
            and _named(body[0].value, resolve, NONE_OUTSIDE)):
        return True
    if not body or len(body) > 2 or (len(body) == 2 and not _returns_none(body[1])):
        return False
    first = body[0]
    if isinstance(first, ast.With) and len(first.items) == 1:
        item = first.items[0].context_expr
        if not isinstance(item, ast.Call):
            return False
        ref = resolve(item.func)
        return (ref is not None and ref.name == "contextlib.suppress"
                and any(_runtime_error(a, resolve) for a in item.args)
                and _returns_loop(first.body, resolve))
    if isinstance(first, ast.Try) and not first.finalbody and not first.orelse:
        return (_returns_loop(first.body, resolve) and len(first.handlers) == 1
                and first.handlers[0].type is not None
                and _runtime_error(first.handlers[0].type, resolve)
                and all(_returns_none(s) for s in first.handlers[0].body))
    return False


def probe(node: ast.Try, resolve: Resolve) -> str | None:
    """``try: asyncio.get_running_loop()`` (or ``x = ...``) and nothing else in the body:
    the name it binds ("" for none), None when the try is no such probe. Its ``except
    RuntimeError`` clause runs only when no loop runs."""
    if len(node.body) != 1:
        return None
    stmt = node.body[0]
    if isinstance(stmt, ast.Expr) and _named(stmt.value, resolve, RAISES_OUTSIDE):
        return ""
    if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name | ast.Attribute)
            and _named(stmt.value, resolve, RAISES_OUTSIDE)):
        return ast.unparse(stmt.targets[0])
    return None


def loopless(handler: ast.ExceptHandler, resolve: Resolve) -> bool:
    """An ``except RuntimeError`` clause (or a tuple naming it) of a probe."""
    kind = handler.type
    parts = kind.elts if isinstance(kind, ast.Tuple) else [kind] if kind is not None else []
    return any(_runtime_error(p, resolve) for p in parts)


def probed(node: ast.Try, key: str, resolve: Resolve) -> bool:
    """``try: key = asyncio.get_running_loop()`` / ``except RuntimeError: key = None``:
    ``key`` holds the running loop or None after it."""
    return (probe(node, resolve) == key and key != "" and not node.orelse
            and not node.finalbody and len(node.handlers) == 1
            and loopless(node.handlers[0], resolve) and len(node.handlers[0].body) == 1
            and isinstance(assign := node.handlers[0].body[0], ast.Assign)
            and len(assign.targets) == 1 and ast.unparse(assign.targets[0]) == key
            and is_none(assign.value))


PROBED = ast.Constant(value=...)  # what ``bound`` gives for a name a probe bound


def _returns_loop(body: list[ast.stmt], resolve: Resolve) -> bool:
    return (len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None
            and _named(body[0].value, resolve, RAISES_OUTSIDE))


def _returns_none(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Return) and (stmt.value is None or (
        isinstance(stmt.value, ast.Constant) and stmt.value.value is None)))


def _runtime_error(node: ast.expr, resolve: Resolve) -> bool:
    ref = resolve(node)
    return ref is not None and ref.name == "builtins.RuntimeError"


def truth(expr: ast.expr, resolve: Resolve, bound: Callable[[ast.expr], ast.expr | None],
          plain: Callable[[ast.expr], Guard | None], depth: int = 0) -> Atom | None:
    """The test that holds exactly when ``expr`` is truthy, if it is a loop expression;
    ``bound`` gives the one value a name or ``self.x`` was bound to in the function,
    ``plain`` the ordinary guard of a condition (``None if C else ...``)."""
    if isinstance(expr, ast.IfExp) and depth < 2:
        if is_none(expr.body):  # None if C else E: (not C) and E
            loop, cond = truth(expr.orelse, resolve, bound, plain, depth + 1), plain(expr.test)
            negate = False
        elif is_none(expr.orelse):  # E if C else None: C and E
            loop, cond = truth(expr.body, resolve, bound, plain, depth + 1), plain(expr.test)
            negate = True
        else:
            return None
        if loop is None or cond is None or len(cond) != 1:
            return None
        c = cond[0].negated() if negate else cond[0]
        return Atom("", "none", (("a", c), ("a", loop.negated())))
    if isinstance(expr, ast.Call) and not expr.args and not expr.keywords:
        func = expr.func
        if (isinstance(func, ast.Attribute) and func.attr == "is_running"
                and _named(func.value, resolve, CURRENT | RAISES_OUTSIDE)):
            return Atom(LOOP, "truthy")
        ref = resolve(func)
        if ref is None:
            return None
        if ref.name in NONE_OUTSIDE:
            return Atom(LOOP, "truthy")
        if ref.kind in ("def", "import"):  # a project helper: known once the run has them all
            return Atom(LOOP, "==", (("s", ref.name + LOOP_GETTER),))
        return None
    if expr is PROBED:
        return Atom(LOOP, "truthy")
    if isinstance(expr, ast.Name | ast.Attribute) and depth == 0:
        value = bound(expr)
        return None if value is None else truth(value, resolve, bound, plain, depth + 1)
    return None


def guard(test: ast.expr, resolve: Resolve, bound: Callable[[ast.expr], ast.expr | None],
          plain: Callable[[ast.expr], Guard | None]) -> Guard | None:
    """The guard an ``if`` test states about the running loop, None when it is no loop
    test (``not x``, ``x is None``, ``x is not None`` of a loop expression ``x``)."""
    negate = False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negate = test.operand, True
    elif (isinstance(test, ast.Compare) and len(test.ops) == 1 and is_none(test.comparators[0])
          and isinstance(test.ops[0], ast.Is | ast.IsNot)):
        negate = isinstance(test.ops[0], ast.Is)
        test = test.left
    atom = truth(test, resolve, bound, plain)
    if atom is None:
        return None
    return (atom.negated() if negate else atom,)
