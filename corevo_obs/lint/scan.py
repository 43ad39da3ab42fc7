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
from .imports import ImportTracker, Ref
from .model import CallSite, FileResult, Finding, FuncFacts
from .noqa import is_silenced, noqa_codes
from .rules import catalogued, declared, message, meta

PARTIAL = "functools.partial"
# nodes that hold no call, lambda or def below them: not walked
_LEAVES = (ast.Name, ast.Constant, ast.expr_context, ast.operator, ast.cmpop, ast.unaryop,
           ast.boolop, ast.alias, ast.Pass, ast.Break, ast.Continue, ast.Import,
           ast.ImportFrom, ast.Global, ast.Nonlocal)
DEEP_RECURSION = 20_000


@dataclass
class _Ctx:
    qualname: str
    display: str
    on_loop: bool
    facts: FuncFacts | None = None
    offloaded: set[int] = field(default_factory=set)


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
            ast.Await: self.visit_Await,
        }
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
        else:
            facts = FuncFacts(display, self.result.path, node.lineno,
                              marked=declared.is_marked(node, self.tracker, self.catalog))
            if qualname in self.result.funcs:
                self._dups.add(qualname)
            self.result.funcs[qualname] = facts
            ctx = _Ctx(qualname, display, on_loop=False, facts=facts)
        self.tracker.push_function(node, qualname)
        self._ctx.append(ctx)
        for stmt in node.body:
            self.visit(stmt)
        self._ctx.pop()
        self.tracker.pop()

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
        if ctx is not None and ref is not None and not self.catalog.is_non_blocking(ref.name):
            self._classify(node, ref, ctx)
        elif (ctx is not None and ctx.on_loop and self._urllib3 and id(node) not in self._awaited
              and (display := catalogued.likely_http(node, ref)) is not None):
            self._report(catalogued.HTTP, node, ctx, display, catalogued.NO_FIELDS)
        self.generic_visit(node)

    def _classify(self, node: ast.Call, ref: Ref, ctx: _Ctx) -> None:
        hit = declared.configured(ref, self.catalog) or catalogued.classify(ref, self.catalog)
        if hit is not None and catalogued.disarmed(node, ref, self.catalog, self.tracker):
            return
        if hit is not None:
            code, display, extra = hit
            if ctx.on_loop:
                self._report(code, node, ctx, display, extra)
            elif ctx.facts is not None and ctx.facts.blocking is None:
                ctx.facts.blocking = display
            return
        if ref.kind not in ("def", "class", "import", "method"):
            return
        if ctx.on_loop:
            if not self._sites:
                return
            self.result.sites.append(CallSite(
                ref.name, self.result.path, node.lineno, node.col_offset + 1, ctx.display,
                ctx.qualname, self.line(node.lineno).strip(), self._noqa(node)))
        elif ctx.facts is not None:
            ctx.facts.callees.append(ref.name)

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
        line = getattr(exc, "lineno", None) or 1
        col = getattr(exc, "offset", None) or 1
        detail = getattr(exc, "msg", None) or str(exc) or type(exc).__name__
        result = FileResult(path=path, module=module)
        result.error = Finding(path, line, col, meta.PARSE, message(meta.PARSE, error=detail))
        return result
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
