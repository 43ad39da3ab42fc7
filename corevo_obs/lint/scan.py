"""The single AST pass over one file: direct findings, plus the facts the project-wide
interprocedural step needs (sync functions, their first blocking call and callees, and
the calls that code on the loop makes into possibly-project functions).

"On the loop" means the body of an ``async def``, and lambdas inside it unless handed to
an offload wrapper. A nested sync ``def`` is a function of its own: calling it from the
async body is a call site (COB110 if it blocks); handing it to ``asyncio.to_thread`` is not.
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass, field
from typing import Any

from .catalog import Catalog
from .guards import OPAQUE, UNKNOWN, Args, Atom, Guard, Value, atoms
from .imports import ImportTracker, Ref
from .model import CallSite, Edge, FileResult, Finding, FuncFacts
from .newer import parse_with_newer
from .noqa import is_silenced, noqa_codes
from .rules import catalogued, declared, message, meta

PARTIAL = "functools.partial"
# nodes that hold no call, lambda or def below them: not walked
_LEAVES = (ast.Name, ast.Constant, ast.expr_context, ast.operator, ast.cmpop, ast.unaryop,
           ast.boolop, ast.alias, ast.Pass, ast.Break, ast.Continue, ast.Import,
           ast.ImportFrom, ast.Global, ast.Nonlocal)
DEEP_RECURSION = 20_000


_SIMPLE = (str, int, bool, float, bytes, type(None))
_EXITS = (ast.Return, ast.Raise, ast.Continue, ast.Break)


@dataclass
class _Ctx:
    qualname: str
    display: str
    on_loop: bool
    facts: FuncFacts | None = None
    node: ast.FunctionDef | None = None
    guard: list[Atom] = field(default_factory=list)  # tests of parameters that lead here
    seen: set[str] = field(default_factory=set)  # "proc.communicate": methods referenced
    _stable: frozenset[str] | None = None

    def stable_params(self) -> frozenset[str]:
        """Parameters the body never rebinds: only their tests say something."""
        if self._stable is None:
            facts, node = self.facts, self.node
            names = facts.names | frozenset(facts.params) if facts is not None else frozenset()
            if node is not None:
                names -= {n.id for stmt in node.body for n in ast.walk(stmt)
                          if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
            self._stable = names
        return self._stable


_NONE = object()


def _constant(node: ast.expr | None) -> object:
    """A simple constant, or a tuple / set of them (as a tuple); ``_NONE`` otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, _SIMPLE):
        return node.value
    if isinstance(node, ast.Tuple | ast.Set | ast.List) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, _SIMPLE) for e in node.elts):
        return tuple(e.value for e in node.elts if isinstance(e, ast.Constant))
    return _NONE


def _module_constants(body: list[ast.stmt]) -> dict[str, object]:
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
            for name in ast.walk(t):
                if isinstance(name, ast.Name):
                    if name.id in seen:
                        found.pop(name.id, None)
                    elif isinstance(t, ast.Name) and (const := _constant(value)) is not _NONE:
                        found[name.id] = const
                    seen.add(name.id)
    return found


class FileScanner(ast.NodeVisitor):
    """Walks one module once; see the module docstring for what it collects."""

    def __init__(self, path: str, module: str, source: bytes, catalog: Catalog, *,
                 is_package: bool = False, bare_noqa: bool = False) -> None:
        self.result = FileResult(path=path, module=module)
        self.catalog = catalog
        self.tracker = ImportTracker(module, is_package=is_package, factories=catalog.factories,
                                     offloads=catalog.offload, aliases=catalog.aliases)
        self.source = source
        self.bare_noqa = bare_noqa
        self._lines: list[str] | None = None
        self._ctx: list[_Ctx] = []
        self._offloaded: set[int] = set()
        self._dups: set[str] = set()
        selection = catalog.selection
        self._sites = selection.any_of("chains") or selection.any_of("declared")
        self._dispatch: dict[type, Any] = {
            ast.Module: self.visit_Module, ast.FunctionDef: self._visit_def,
            ast.AsyncFunctionDef: self._visit_def, ast.Lambda: self.visit_Lambda,
            ast.ClassDef: self.visit_ClassDef, ast.Call: self.visit_Call,
            ast.Await: self.visit_Await, ast.If: self.visit_If,
        }
        self._consts: dict[str, object] = {}
        self._awaited: set[int] = set()
        self._urllib3 = False

    # -- helpers ---------------------------------------------------------------------
    def line(self, lineno: int) -> str:
        if self._lines is None:
            self._lines = self.source.decode("utf-8", "replace").splitlines()
        return self._lines[lineno - 1] if 0 < lineno <= len(self._lines) else ""

    def _noqa(self, node: ast.expr) -> frozenset[str] | None:
        codes = noqa_codes(self.line(node.lineno))
        end = getattr(node, "end_lineno", None)
        if codes is None and end and end != node.lineno:
            codes = noqa_codes(self.line(end))
        return codes

    def _report(self, code: str, node: ast.expr, ctx: _Ctx, call: str,
                extra: dict[str, str]) -> None:
        if (not self.catalog.selection.enabled(code)
                or is_silenced(code, self._noqa(node), bare_noqa=self.bare_noqa)):
            return
        text = message(code, call=call, func=ctx.display, **extra)
        self.result.findings.append(Finding(
            self.result.path, node.lineno, node.col_offset + 1, code, text,
            ctx.qualname, self.line(node.lineno).strip()))

    def _child_qualname(self, name: str) -> str:
        scope = self.tracker.stack[-1]
        sep = ".<locals>." if scope.kind == "function" else "."
        return f"{scope.qualname}{sep}{name}"

    def _display(self, qualname: str) -> str:
        local = qualname[len(self.result.module) + 1:]
        return local.rpartition("<locals>.")[2]

    # -- the walk: a type-keyed dispatch, cheaper than NodeVisitor's name lookup -------
    def visit(self, node: ast.AST) -> None:
        handler = self._dispatch.get(type(node))
        if handler is not None:
            handler(node)
        elif not isinstance(node, _LEAVES):
            self.generic_visit(node)

    def generic_visit(self, node: ast.AST) -> None:
        dispatch = self._dispatch
        for child in ast.iter_child_nodes(node):
            handler = dispatch.get(type(child))
            if handler is not None:
                handler(child)
            elif not isinstance(child, _LEAVES):
                self.generic_visit(child)

    # -- scopes ----------------------------------------------------------------------
    def visit_Module(self, node: ast.Module) -> None:
        self.tracker.push_module(node.body)
        self._urllib3 = any(b.kind == "import" and (b.target or "").partition(".")[0] == "urllib3"
                            for b in self.tracker.stack[-1].bindings.values())
        self._consts = _module_constants(node.body)
        self.result.constants = {f"{self.result.module}.{k}": v for k, v in self._consts.items()}
        self.generic_visit(node)
        scope = self.tracker.pop()
        module = self.result.module
        self.result.reexports = {f"{module}.{name}": b.target
                                 for name, b in scope.bindings.items()
                                 if b.kind == "import" and b.target}

    def _visit_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for expr in [*node.decorator_list, *node.args.defaults,
                     *(d for d in node.args.kw_defaults if d is not None)]:
            self.visit(expr)
        qualname = self._child_qualname(node.name)
        display = self._display(qualname)
        if isinstance(node, ast.AsyncFunctionDef):
            ctx = _Ctx(qualname, display, on_loop=True)
        elif self._offload_decorated(node):  # @sync_to_async def f(): calls return awaitables
            ctx = _Ctx(qualname, display, on_loop=False)
        else:
            facts = FuncFacts(display, self.result.path, node.lineno,
                              marked=declared.is_marked(node, self.tracker, self.catalog))
            self._signature(node, facts)
            if qualname in self.result.funcs:
                self._dups.add(qualname)
            self.result.funcs[qualname] = facts
            ctx = _Ctx(qualname, display, on_loop=False, facts=facts, node=node)
        self.tracker.push_function(node, qualname)
        self._ctx.append(ctx)
        self._visit_block(node.body)
        self._ctx.pop()
        self.tracker.pop()

    def _offload_decorated(self, node: ast.FunctionDef) -> bool:
        for deco in node.decorator_list:
            ref = self.tracker.resolve(deco.func if isinstance(deco, ast.Call) else deco)
            if ref is not None and ref.name in self.catalog.offload:
                return True
        return False

    def _signature(self, node: ast.FunctionDef, facts: FuncFacts) -> None:
        """Positional parameters (without self / cls), keyword names, constant defaults."""
        args = node.args
        positional = [a.arg for a in [*args.posonlyargs, *args.args]]
        keywords = {a.arg for a in [*args.args, *args.kwonlyargs]}
        in_class = self.tracker.stack[-1].kind == "class"
        static = any(isinstance(d, ast.Name) and d.id == "staticmethod"
                     for d in node.decorator_list)
        if in_class and not static and positional:
            keywords.discard(positional.pop(0))
        facts.params = tuple(positional)
        facts.names = frozenset(keywords)
        pairs = [*zip(reversed([*args.posonlyargs, *args.args]), reversed(args.defaults),
                      strict=False),
                 *((a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
                   if d is not None)]
        for a, default in pairs:
            value = self._value(default, None)
            if value != UNKNOWN:
                facts.defaults[a.arg] = value

    # -- guards ----------------------------------------------------------------------
    def _value(self, node: ast.expr, ctx: _Ctx | None) -> Value:
        """A constant, a module constant, a helper's own parameter (``ctx``), or UNKNOWN."""
        if isinstance(node, ast.Constant):
            return ("v", node.value) if isinstance(node.value, _SIMPLE) else UNKNOWN
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self._value(node.operand, None)
            if inner[0] == "v" and type(inner[1]) in (int, float):
                return ("v", -inner[1])  # type: ignore[operator]
            return UNKNOWN
        if isinstance(node, ast.Name):
            if ctx is not None and node.id in ctx.stable_params():
                return ("p", node.id)
            binding = self.tracker.lookup(node.id)
            module = self.tracker.stack[0].bindings.get(node.id)
            if binding is not None and binding is module and node.id in self._consts:
                return ("v", self._consts[node.id])
        if isinstance(node, ast.Name | ast.Attribute):
            ref = self.tracker.resolve(node)
            if ref is not None and ref.kind == "import":
                return ("s", ref.name)
        return UNKNOWN

    def _atoms(self, test: ast.expr, ctx: _Ctx) -> Guard | None:
        params = ctx.stable_params()
        if not params:
            return None
        return atoms(test, lambda e: self._value(e, None), params)

    def _args(self, node: ast.Call, ctx: _Ctx | None) -> Args:
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
                k.arg is None for k in node.keywords):
            return OPAQUE
        func = node.func
        if isinstance(func, ast.Attribute):
            base = self.tracker.resolve(func.value)
            if base is not None and base.kind == "class":  # C.method(obj, ...): unbound
                return OPAQUE
        scope = ctx if ctx is not None and ctx.facts is not None else None
        return Args(tuple(self._value(a, scope) for a in node.args),
                    tuple((str(k.arg), self._value(k.value, scope)) for k in node.keywords))

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        ctx = self._ctx[-1] if self._ctx else None
        guard = self._atoms(node.test, ctx) if ctx is not None and ctx.facts is not None else None
        if ctx is None or not guard:
            self._visit_block(node.body)
            self._visit_block(node.orelse)
            return
        ctx.guard.extend(guard)
        self._visit_block(node.body)
        del ctx.guard[-len(guard):]
        negated = [guard[0].negated()] if len(guard) == 1 else []
        ctx.guard.extend(negated)
        self._visit_block(node.orelse)
        del ctx.guard[len(ctx.guard) - len(negated):]

    def _visit_block(self, stmts: list[ast.stmt]) -> None:
        """Statements in order; after ``if <test>: ... return`` the rest runs only when the
        test is false, so it is guarded by the negated test."""
        ctx = self._ctx[-1] if self._ctx else None
        pushed = 0
        for stmt in stmts:
            self.visit(stmt)
            if (ctx is not None and ctx.facts is not None and isinstance(stmt, ast.If)
                    and not stmt.orelse and stmt.body and isinstance(stmt.body[-1], _EXITS)):
                guard = self._atoms(stmt.test, ctx)
                if guard is not None and len(guard) == 1:
                    ctx.guard.append(guard[0].negated())
                    pushed += 1
        if pushed and ctx is not None:
            del ctx.guard[-pushed:]

    visit_FunctionDef = _visit_def
    visit_AsyncFunctionDef = _visit_def

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for expr in [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]:
            self.visit(expr)
        parent = self._ctx[-1] if self._ctx else None
        on_loop = parent is not None and parent.on_loop and id(node) not in self._offloaded
        qualname = self._child_qualname("<lambda>")
        where = parent.display if parent else "<module>"
        self.tracker.push_function(node, qualname)
        self._ctx.append(_Ctx(qualname, f"{where} (lambda)", on_loop=on_loop))
        self.visit(node.body)
        self._ctx.pop()
        self.tracker.pop()

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expr in [*node.decorator_list, *node.bases, *(k.value for k in node.keywords)]:
            self.visit(expr)
        self.tracker.push_class(node, self._child_qualname(node.name))
        for stmt in node.body:
            self.visit(stmt)
        self.tracker.pop()

    # -- calls -----------------------------------------------------------------------
    def _offload_index(self, node: ast.Call, ref: Ref | None) -> int | None:
        offload = self.catalog.offload
        if ref is not None:
            key = f"{ref.type}.{ref.attr}" if ref.kind == "method" else ref.name
            if key in offload:
                return offload[key]
        if isinstance(node.func, ast.Attribute):
            return self.catalog.offload_methods.get(node.func.attr)
        return None

    def _mark_offloaded(self, node: ast.Call, ref: Ref | None) -> None:
        index = self._offload_index(node, ref)
        if index is None or len(node.args) <= index:
            return
        arg = node.args[index]
        if isinstance(arg, ast.Call) and arg.args:
            inner = self.tracker.resolve(arg.func)
            if inner is not None and inner.name == PARTIAL:
                arg = arg.args[0]
        if isinstance(arg, ast.Lambda):
            self._offloaded.add(id(arg))

    def visit_Await(self, node: ast.Await) -> None:
        self._awaited.add(id(node.value))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        ref = self.tracker.resolve(node.func)
        self._mark_offloaded(node, ref)
        ctx = self._ctx[-1] if self._ctx else None
        if ctx is not None:
            catalogued.note_methods(node, self.catalog, ctx.seen)
        if ctx is not None and ref is not None and not self.catalog.is_non_blocking(ref.name):
            self._classify(node, ref, ctx)
        elif (ctx is not None and ctx.on_loop and self._urllib3 and id(node) not in self._awaited
              and (display := catalogued.likely_http(node, ref)) is not None):
            self._report(catalogued.HTTP, node, ctx, display, catalogued.NO_FIELDS)
        self.generic_visit(node)

    def _classify(self, node: ast.Call, ref: Ref, ctx: _Ctx) -> None:
        hit = declared.configured(ref, self.catalog) or catalogued.classify(ref, self.catalog)
        if hit is not None and catalogued.returns_at_once(node, ref, self.catalog, self.tracker,
                                                          ctx.seen):
            return
        if hit is not None:
            code, display, extra = hit
            if ctx.on_loop:
                self._report(code, node, ctx, display, extra)
            elif (ctx.facts is not None and ctx.facts.blocking is None
                  and ref.name not in self.catalog.direct_only):
                ctx.facts.blocks.append((display, tuple(ctx.guard)))
            return
        if ref.kind not in ("def", "class", "import", "method"):
            return
        if ctx.on_loop:
            if not self._sites:
                return
            self.result.sites.append(CallSite(
                ref.name, self.result.path, node.lineno, node.col_offset + 1, ctx.display,
                ctx.qualname, self.line(node.lineno).strip(), self._noqa(node),
                self._args(node, None)))
        elif ctx.facts is not None and ctx.facts.blocking is None:
            ctx.facts.edges.append(Edge(ref.name, tuple(ctx.guard), self._args(node, ctx)))

    def finish(self) -> FileResult:
        for qualname in self._dups:
            del self.result.funcs[qualname]
        return self.result


def scan_source(path: str, module: str, source: bytes, catalog: Catalog, *,
                is_package: bool = False, bare_noqa: bool = False) -> FileResult:
    """Scan one file's source; a file that cannot be parsed yields a COB900 finding."""
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        newer, said = (parse_with_newer(source, path) if isinstance(exc, SyntaxError)
                       else (None, ""))
        if newer is None:
            line = getattr(exc, "lineno", None) or 1
            col = getattr(exc, "offset", None) or 1
            detail = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
            here = "Python {}.{}".format(*sys.version_info[:2])
            detail = f"{detail} ({here}; {said or 'no newer Python installed to try'})"
            result = FileResult(path=path, module=module)
            result.error = Finding(path, line, col, meta.PARSE,
                                   message(meta.PARSE, error=detail))
            return result
        tree = newer
    scanner = FileScanner(path, module, source, catalog, is_package=is_package,
                          bare_noqa=bare_noqa)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, DEEP_RECURSION))  # generated code nests deeply
    try:
        scanner.visit(tree)
    except RecursionError:
        result = FileResult(path=path, module=module)
        result.error = Finding(path, 1, 1, meta.PARSE,
                               message(meta.PARSE, error="nesting too deep"))
        return result
    finally:
        sys.setrecursionlimit(limit)
    return scanner.finish()
