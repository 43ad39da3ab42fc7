"""What a block of statements binds: the names and ``self`` attributes it stores (plain
``x = ...`` apart from the rest), a module's constants and its plain functions. The scan
reads these to know which parameters, globals and attributes keep the value it saw."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from .imports import BINDS_NOTHING, walk
from .narrowing import Kind

SIMPLE = (str, int, bool, float, bytes, type(None))
_NONE = object()
# displays whose value is unknown but whose type is not
KINDS: dict[type, str] = {ast.Dict: "builtins.dict", ast.DictComp: "builtins.dict",
                          ast.ListComp: "builtins.list", ast.SetComp: "builtins.set",
                          ast.JoinedStr: "builtins.str"}


def _constant(node: ast.expr | None) -> object:
    """A simple constant, or a tuple / set of them (as a tuple), a ``Kind`` for a display
    whose type only is known; ``_NONE`` otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, SIMPLE):
        return node.value
    if node is not None and type(node) in KINDS:
        return Kind(KINDS[type(node)])
    if isinstance(node, ast.Tuple | ast.Set | ast.List) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, SIMPLE) for e in node.elts):
        return tuple(e.value for e in node.elts if isinstance(e, ast.Constant))
    return _NONE


def plain_defs(body: list[ast.stmt]) -> set[str]:
    """Module-level names bound only by one undecorated ``def``: functions, nothing else."""
    defs: dict[str, int] = {}
    other: set[str] = set()
    for stmt in body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            key = stmt.name if not stmt.decorator_list and not isinstance(
                stmt, ast.ClassDef) else ""
            defs[stmt.name] = defs.get(stmt.name, 0) + (1 if key else 2)
            continue
        for n in walk(stmt):
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                other.add(n.id)
            elif isinstance(n, ast.alias):
                other.add((n.asname or n.name).partition(".")[0])
            elif isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                other.add(n.name)
    return {name for name, count in defs.items() if count == 1 and name not in other}


def module_constants(body: list[ast.stmt]) -> dict[str, object]:
    """``NAME = <constant>`` at module level, assigned exactly once there."""
    found: dict[str, object] = {}
    seen: set[str] = set()
    for stmt in body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign | ast.AugAssign):
            targets, value = [stmt.target], getattr(stmt, "value", None)
            if isinstance(stmt, ast.AugAssign):
                value = None
        for t in targets:
            for name in walk(t):
                if isinstance(name, ast.Name):
                    if name.id in seen:
                        found.pop(name.id, None)
                    elif isinstance(t, ast.Name) and (const := _constant(value)) is not _NONE:
                        found[name.id] = const
                    seen.add(name.id)
    return found


_BODIES = ("body", "orelse", "finalbody")
_NO_STORES = BINDS_NOTHING | {ast.Expr}  # an expression stores only by ``:=`` (not seen here)


def store_targets(stmts: list[ast.stmt]) -> Iterator[tuple[ast.AST, bool]]:
    """(node that binds a name or attribute, made by a plain ``x = ...``?) for these
    statements and every statement nested in them, nested defs included. Expressions are
    not entered: only ``:=`` binds inside one (see ``walk_stores``), a comprehension's
    variables are its own."""
    stack: list[ast.AST] = list(stmts)
    while stack:
        st = stack.pop()
        targets: list[ast.expr] = []
        if type(st) in _NO_STORES:
            pass
        elif isinstance(st, ast.Assign):
            if len(st.targets) == 1 and isinstance(st.targets[0], ast.Name | ast.Attribute):
                yield st.targets[0], True
            else:
                targets = st.targets
        elif isinstance(st, ast.AugAssign | ast.AnnAssign | ast.For | ast.AsyncFor):
            targets = [st.target]
        elif isinstance(st, ast.With | ast.AsyncWith):
            targets = [i.optional_vars for i in st.items if i.optional_vars is not None]
        elif isinstance(st, ast.Delete):
            targets = st.targets
        elif isinstance(st, ast.Import | ast.ImportFrom):
            yield from ((a, False) for a in st.names)
        elif isinstance(st, ast.Global | ast.Nonlocal):
            yield from ((ast.Name(n, ast.Store()), False) for n in st.names)
        elif isinstance(st, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                        | ast.ExceptHandler):
            yield st, False
        elif isinstance(st, ast.Match):
            for case in st.cases:
                yield from ((n, False) for n in walk(case.pattern))
                stack.extend(case.body)
        elif isinstance(st, ast.Try | ast.TryStar):
            stack.extend(st.handlers)
        for t in targets:
            yield from ((n, False) for n in walk(t)
                        if isinstance(n, ast.Name | ast.Attribute)
                        and not isinstance(n.ctx, ast.Load))
        for name in _BODIES:
            stack.extend(getattr(st, name, ()))


def walk_stores(stmts: list[ast.stmt]) -> Iterator[tuple[ast.AST, bool]]:
    """The same as ``store_targets`` by walking every node (for files that use ``:=``)."""
    plain: set[int] = set()
    for stmt in stmts:
        for n in walk(stmt):
            if isinstance(n, ast.Assign) and len(n.targets) == 1:
                plain.add(id(n.targets[0]))
            yield n, id(n) in plain


def attribute_stores(node: ast.ClassDef) -> dict[str, dict[str, int]]:
    """``attr -> {method: stores of self.attr}`` for the class's own methods. Attributes
    that are methods or properties of the class, and every attribute of a class with
    its own ``__setattr__`` / ``__getattribute__``, are left out: assigning them runs code."""
    methods = [m for m in node.body if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)]
    names = {m.name for m in methods}
    if names & {"__setattr__", "__getattribute__"}:
        return {}
    out: dict[str, dict[str, int]] = {}
    for m in methods:
        first = [*m.args.posonlyargs, *m.args.args][:1]
        if not first:
            continue
        me = first[0].arg
        for n, _ in store_targets(m.body):  # attributes are never bound by ``:=``
            if (isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                    and n.value.id == me and n.attr not in names):
                where = out.setdefault(n.attr, {})
                where[m.name] = where.get(m.name, 0) + 1
    return out
