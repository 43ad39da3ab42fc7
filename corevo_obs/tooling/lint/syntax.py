"""Shapes of syntax the scan asks about, each answerable from the node alone: whether a
clause can run (constant tests, ``# pragma: no cover``), whether a body yields or always
exits, what a method is (abstract, a property's setter), and calls that hand a function to
a thread or a file object to a pipe transport."""

from __future__ import annotations

import ast
import copy
import re
from collections import Counter
from typing import cast

from .imports import walk

EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)
SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
# asyncio's pipe transports: they take a file object for its descriptor and do their own
# non-blocking I/O on it; wrapping a descriptor for them (``os.fdopen(fd, "wb")``,
# ``open(fd)``) resolves no path and reads or writes nothing
_PIPE_TRANSPORTS = frozenset({"connect_write_pipe", "connect_read_pipe"})


def property_accessor(node: ast.FunctionDef) -> str:
    """``setter`` / ``deleter`` for ``@p.setter def p(...)``, else ``""``."""
    for deco in node.decorator_list:
        if (isinstance(deco, ast.Attribute) and deco.attr in ("setter", "deleter")
                and isinstance(deco.value, ast.Name) and deco.value.id == node.name):
            return deco.attr
    return ""


def shadowed_defs(body: list[ast.stmt]) -> set[int]:
    """The coroutines of a module or class body that a later ``def`` of the same name
    replaces before anything can call them (a test written twice: pytest collects the last
    one only). An earlier def with a decorator that may register it (``@app.get(...)``, a
    route per def), or whose name a statement between the two reads, stays live; pytest's
    marks register nothing."""
    dead: set[int] = set()
    names = Counter(s.name for s in body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef))
    for i, stmt in enumerate(body):
        if not (isinstance(stmt, ast.AsyncFunctionDef) and names[stmt.name] > 1 and all(
                ast.unparse(d).startswith("pytest.mark.") for d in stmt.decorator_list)):
            continue
        for later in body[i + 1:]:
            if isinstance(later, ast.FunctionDef | ast.AsyncFunctionDef) and \
                    later.name == stmt.name:
                if stmt.name not in {n.id for d in later.decorator_list for n in ast.walk(d)
                                     if isinstance(n, ast.Name)}:
                    dead.add(id(stmt))
                break
            if stmt.name in {n.id for n in ast.walk(later) if isinstance(n, ast.Name)}:
                break
    return dead


def simple_properties(node: ast.ClassDef) -> dict[str, tuple[str, ast.expr]]:
    """``@property`` methods whose body is one ``return <expr>``: name -> (self, expr)."""
    out: dict[str, tuple[str, ast.expr]] = {}
    for m in node.body:
        if not (isinstance(m, ast.FunctionDef) and m.args.args and any(
                isinstance(d, ast.Name) and d.id == "property" for d in m.decorator_list)):
            continue
        body = [s for s in m.body if not (isinstance(s, ast.Expr)
                                         and isinstance(s.value, ast.Constant))]
        if len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None:
            out[m.name] = (m.args.args[0].arg, body[0].value)
    return out


class _Inline(ast.NodeTransformer):
    """``self.p`` -> the property's expression, its own ``self`` renamed."""

    def __init__(self, me: str, props: dict[str, tuple[str, ast.expr]]) -> None:
        self.me, self.props = me, props

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == self.me:
            prop = self.props.get(node.attr)
            if prop is not None:
                return cast(ast.AST, _Rename(prop[0], self.me).visit(copy.deepcopy(prop[1])))
        return self.generic_visit(node)


class _Rename(ast.NodeTransformer):
    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new

    def visit_Name(self, node: ast.Name) -> ast.Name:
        return ast.Name(self.new, node.ctx) if node.id == self.old else node


def inline_properties(test: ast.expr, me: str,
                       props: dict[str, tuple[str, ast.expr]]) -> ast.expr:
    if not props or not any(isinstance(n, ast.Attribute) and n.attr in props
                            for n in walk(test)):
        return test
    out = _Inline(me, props).visit(copy.deepcopy(test))
    assert isinstance(out, ast.expr)
    return out


_NO_COVER = re.compile(rb"#\s*pragma:\s*no\s*cover")


def no_cover_lines(source: bytes) -> frozenset[int]:
    """Numbers of the lines marked ``# pragma: no cover``."""
    return frozenset(i for i, line in enumerate(source.splitlines(), 1)
                     if b"no cover" in line and _NO_COVER.search(line))


def in_thread(call: ast.Call) -> bool:
    """``thread=True`` given: the worker API or decorator runs the callable in a thread
    (textual's ``@work(thread=True)``, ``run_worker(fn, thread=True)``)."""
    return any(k.arg == "thread" and isinstance(k.value, ast.Constant) and k.value.value is True
               for k in call.keywords)


def is_abstract(node: ast.FunctionDef) -> bool:
    """A method left to subclasses: ``@abstractmethod``, or a body (past its docstring)
    that only raises ``NotImplementedError``."""
    if any(ast.unparse(d).rpartition(".")[2] == "abstractmethod" for d in node.decorator_list):
        return True
    body = node.body[1:] if (node.body and isinstance(node.body[0], ast.Expr)
                             and isinstance(node.body[0].value, ast.Constant)) else node.body
    return (len(body) == 1 and isinstance(body[0], ast.Raise) and body[0].exc is not None
            and ast.unparse(body[0].exc).partition("(")[0] == "NotImplementedError")


def called_names(node: ast.AST) -> set[str]:
    """The plain names called anywhere in ``node`` (``Daemon()``, ``main()``)."""
    return {n.func.id for n in ast.walk(node)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def is_main_test(test: ast.expr) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = {ast.unparse(test.left), ast.unparse(test.comparators[0])}
    return sides in ({"__name__", "'__main__'"}, {"__name__", '"__main__"'})


def transport_wraps(func: ast.FunctionDef | ast.AsyncFunctionDef) -> set[int]:
    """The calls in ``func`` whose file object only goes to a pipe transport: an argument
    of ``loop.connect_write_pipe`` / ``connect_read_pipe``, written there or bound to a
    local name once and read nowhere else (an object also read or written synchronously
    stays a finding). A path spelled as a string is not a descriptor: its open stays."""
    handed: dict[str, int] = {}
    loads: dict[str, int] = {}
    bound: dict[str, list[ast.expr]] = {}
    out: list[ast.Call] = []
    for node in ast.walk(func):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in _PIPE_TRANSPORTS):
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(arg, ast.Call):
                    out.append(arg)
                elif isinstance(arg, ast.Name):
                    handed[arg.id] = handed.get(arg.id, 0) + 1
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loads[node.id] = loads.get(node.id, 0) + 1
        elif (isinstance(node, ast.Assign) and len(node.targets) == 1
              and isinstance(node.targets[0], ast.Name)):
            bound.setdefault(node.targets[0].id, []).append(node.value)
    for name, count in handed.items():
        values = bound.get(name, [])
        if loads.get(name) == count and len(values) == 1 and isinstance(values[0], ast.Call):
            out.append(values[0])
    return {id(c) for c in out if c.args and not isinstance(c.args[0], ast.JoinedStr)
            and not (isinstance(c.args[0], ast.Constant)
                     and isinstance(c.args[0].value, str | bytes))}


def _holds(nodes: list[ast.AST], kinds: type | tuple[type, ...]) -> bool:
    """A node of ``kinds`` in ``nodes`` outside the nested scopes they hold."""
    todo = [n for n in nodes if not isinstance(n, SCOPES)]
    while todo:
        here = todo.pop()
        if isinstance(here, kinds):
            return True
        todo.extend(c for c in ast.iter_child_nodes(here) if not isinstance(c, SCOPES))
    return False


def has_yield(node: ast.AST) -> bool:
    """A ``yield`` in ``node`` outside the nested scopes it holds."""
    return _holds([node], (ast.Yield, ast.YieldFrom))


def suspends(stmts: list[ast.stmt]) -> bool:
    """Whether the statements give the loop to another task (an ``await``, ``async for``)
    outside the nested scopes they hold. Not ``async with`` alone: entering an uncontended
    ``asyncio.Lock`` or ``Condition`` returns without suspending."""
    return _holds(list(stmts), (ast.Await, ast.AsyncFor))


def always_exits(node: ast.If) -> bool:
    """A constant-true ``if`` whose body ends by leaving the block."""
    live = live_clauses(node)
    return (live.body is node.body and bool(node.body) and not live.orelse
            and isinstance(node.body[-1], EXITS) and live is not node)


def live_clauses(node: ast.If) -> ast.If:
    """The if without the clause a constant test rules out (``if True: ... else: <dead>``,
    ``if 0:``, ``if not False:``): a branch that cannot run holds no finding. Coverage
    pragmas are not read: ``# pragma: no cover`` says what a test suite skips, not what
    never runs."""
    test, negated = node.test, False
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negated = test.operand, not negated
    if not isinstance(test, ast.Constant) or test.value is Ellipsis:
        return node
    live = copy.copy(node)
    if bool(test.value) != negated:
        live.orelse = []
    else:
        live.body = []
    return live


def sync_twins(func: ast.FunctionDef, coroutines: frozenset[str]) -> frozenset[int]:
    """The calls a sync dispatcher returns beside a coroutine: ``return inner_async() if
    isinstance(client, AioClient) else inner()``, or ``return`` of each in an ``if``. A
    caller that awaits the dispatcher's result gets the coroutine arm (the other result
    is no awaitable), so those calls do not run for it. ``coroutines``: the module's
    ``async def`` names; the function's own nested ones count too. Empty when the function
    returns no coroutine call."""
    local = coroutines | {s.name for s in func.body if isinstance(s, ast.AsyncFunctionDef)}
    returned: list[ast.expr] = []
    todo = list(func.body)
    while todo:  # statements only, not into nested defs, classes or lambdas
        stmt = todo.pop()
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            value = stmt.value
            returned.extend([value.body, value.orelse] if isinstance(value, ast.IfExp)
                            else [value])
        elif not isinstance(stmt, _SCOPES):
            for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                todo.extend(getattr(stmt, name, ()))
    calls = [c for c in returned if isinstance(c, ast.Call)]
    if not any(_calls_one_of(c, local) for c in calls):
        return frozenset()
    return frozenset(id(c) for c in calls if not _calls_one_of(c, local))


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _calls_one_of(call: ast.Call, names: frozenset[str]) -> bool:
    return isinstance(call.func, ast.Name) and call.func.id in names
