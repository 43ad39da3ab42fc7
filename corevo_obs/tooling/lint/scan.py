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
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from . import address_probe, handed, running_loop
from .call_catalog import Catalog
from .file_modes import FILE_TYPE, FLUSHING, OPENERS, QUIET, UNSURE, flush_state
from .file_modes import stores as bindings_of
from .imports import (
    AMBIGUOUS,
    GETTER,
    PROPERTY_DECORATORS,
    Binding,
    ImportTracker,
    Ref,
    Scope,
    is_none,
    item_type,
    walk,
)
from .model import (
    FALLBACK,
    FIRST_CALL,
    FIRST_USE,
    READ,
    UNNAMED,
    CallSite,
    Edge,
    FileResult,
    Finding,
    FuncFacts,
    ParamCall,
    Pending,
)
from .narrowing import (
    AWAITED,
    LOOP,
    LOOP_GETTER,
    OPAQUE,
    SELF,
    TYPES,
    UNKNOWN,
    Args,
    Atom,
    Guard,
    Kind,
    Value,
    atoms,
    either,
)
from .newer import parse_with_newer
from .noqa import DEFAULT_NOQA, NoqaPolicy, noqa_codes
from .returns import SELF_TYPE
from .rules import catalogued, declared, message, meta
from .rules.base import CONSTRUCTOR, LOOP_CALLBACK, PROTOCOL_CALLBACK
from .stores import (
    KINDS,
    SIMPLE,
    attribute_stores,
    module_constants,
    plain_defs,
    store_targets,
    walk_stores,
)
from .syntax import (
    EXITS,
    always_exits,
    called_names,
    has_yield,
    in_thread,
    inline_properties,
    is_abstract,
    is_main_test,
    live_clauses,
    no_cover_lines,
    property_accessor,
    shadowed_defs,
    simple_properties,
    suspends,
    sync_twins,
    transport_wraps,
)

PARTIAL = "functools.partial"
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
# the keywords an offload takes its callable by, when not given by position
_CALLABLE_KEYWORDS = frozenset({"func", "fn", "function", "target", "callback"})
# calls that iterate the iterable they are given where they are called
_CONSUMERS = frozenset(f"builtins.{n}" for n in (
    "list", "tuple", "set", "frozenset", "sorted", "sum", "min", "max", "any", "all", "dict",
    "next", "enumerate", "zip", "map", "filter", "reversed", "iter"))


def _dotted(node: ast.expr) -> str:
    """``a.b.c`` for a name or an attribute chain on one, else ''."""
    if type(node) is ast.Name:
        return node.id
    if type(node) is ast.Attribute:
        head = _dotted(node.value)
        return f"{head}.{node.attr}" if head else ""
    return ""


CONSTRUCTORS = frozenset({"__init__", "__post_init__", "__attrs_post_init__"})
# nodes that hold no call, lambda or def below them: not walked
_LEAVES = (ast.Name, ast.Constant, ast.expr_context, ast.operator, ast.cmpop, ast.unaryop,
           ast.boolop, ast.alias, ast.Pass, ast.Break, ast.Continue, ast.Import,
           ast.ImportFrom, ast.Global, ast.Nonlocal)
DEEP_RECURSION = 20_000
# fields that never hold a node the walk enters (names, numbers, contexts, operators)
_SCALAR_FIELDS = frozenset({"id", "attr", "name", "arg", "module", "level", "kind", "conversion",
                            "is_async", "type_comment", "simple", "tag", "kwd_attrs", "ctx",
                            "op", "names"})
_NODE_TYPES = tuple(k for k in vars(ast).values() if isinstance(k, type) and issubclass(k, ast.AST))


def _child_fields(kind: type) -> tuple[str, ...]:
    """The fields of a node type that may hold nodes to walk, in ``_fields`` order (the
    order ``ast.iter_child_nodes`` gives), computed once per type."""
    fields = _CHILD_FIELDS[kind] = tuple(
        f for f in getattr(kind, "_fields", ()) if f not in _SCALAR_FIELDS)
    return fields


_CHILD_FIELDS: dict[type, tuple[str, ...]] = {}
for _kind in _NODE_TYPES:
    _child_fields(_kind)
_LEAF_TYPES = tuple(k for k in _NODE_TYPES if issubclass(k, _LEAVES))
_WALKED_TYPES = tuple(k for k in _NODE_TYPES if not issubclass(k, _LEAVES))
_FD_NEEDLES: dict[int, tuple[Catalog, tuple[bytes, ...]]] = {}


def _fd_needles(catalog: Catalog) -> tuple[bytes, ...]:
    """What a file must spell to bind a descriptor: ``os.pipe``, ``x.fileno`` (per catalog,
    computed once, not per file)."""
    hit = _FD_NEEDLES.get(id(catalog))
    if hit is None or hit[0] is not catalog:
        needles = tuple(dict.fromkeys(".".join(n.split(".")[-2:]).encode() for n in
                                      (*catalog.fd_factories, *catalog.pipes, ".fileno")))
        hit = _FD_NEEDLES[id(catalog)] = (catalog, needles)
    return hit[1]


_THREAD_NEEDLES: dict[int, tuple[Catalog, tuple[bytes, ...]]] = {}


def _thread_needles(catalog: Catalog) -> tuple[bytes, ...]:
    """What a file must spell to hand a function to a thread: ``Thread``, an offload's or
    offload method's last name (per catalog, computed once)."""
    hit = _THREAD_NEEDLES.get(id(catalog))
    if hit is None or hit[0] is not catalog:
        names = [n.rpartition(".")[2] for n in (*catalog.offload, *catalog.offload_methods)]
        needles = tuple(dict.fromkeys(n.encode() for n in ("Thread", *names) if n))
        hit = _THREAD_NEEDLES[id(catalog)] = (catalog, needles)
    return hit[1]


# decorators that hand back what the function returned
_RESULT_KEEPING = frozenset({"builtins.staticmethod", "builtins.classmethod", "functools.cache",
                             "functools.lru_cache", "typing.override",
                             "typing_extensions.override"})
_EXIT_TYPES = frozenset(EXITS)
_SELF_TYPES = frozenset({"typing.Self", "typing_extensions.Self"})
_UNAWAITED = Atom(AWAITED, "falsy")  # what a dispatcher returns when not awaited
_DISPLAYS = {ast.List: "builtins.list", ast.Tuple: "builtins.tuple", ast.Set: "builtins.set"}
# parameter annotations that name a builtin type (``Tuple[str, int]``, ``bytes``): the
# builtins an ``isinstance`` guard knows (``narrowing.TYPES``) and typing's aliases of them
_BUILTIN_ANNOTATIONS = {
    **{t: t for t in TYPES if t.startswith("builtins.")},
    **{t: f"builtins.{t.lower()}" for t in ("Tuple", "List", "Dict", "Set", "FrozenSet")}}
# what wraps a descriptor for a pipe transport (``os.fdopen(fd, "wb")``, ``open(fd)``):
# it resolves no path and reads or writes nothing
_PIPE_WRAPS = frozenset({"os.fdopen", "builtins.open", "io.open"})
_STDLIB = sys.stdlib_module_names | {"builtins"}
# what takes the awaitables that calls return (``gather(f(), g())``): such a call's result
# must be awaitable, as if it were awaited
_AWAITING = frozenset({f"asyncio.{n}" for n in ("gather", "wait_for", "create_task",
                                                "ensure_future", "shield")})
_AWAITING_METHODS = frozenset({"create_task"})  # loop.create_task, TaskGroup.create_task


@dataclass
class _Ctx:
    qualname: str
    display: str
    on_loop: bool
    facts: FuncFacts | None = None
    node: ast.FunctionDef | None = None
    guard: list[Atom] = field(default_factory=list)  # tests of parameters that lead here
    seen: set[str] = field(default_factory=set)  # "proc.communicate": methods referenced
    self_name: str | None = None  # a method's first parameter
    attrs: frozenset[str] = frozenset()  # "self.x" usable as parameters (guards.py)
    init_values: dict[str, Value] | None = None  # in __init__: "self.x" -> value assigned
    top: frozenset[int] = frozenset()  # ids of the body's top-level statements
    instances: dict[str, Value] = field(default_factory=dict)  # x = C(...): ("i", ...)
    _stable: frozenset[str] | None = None
    _counts: dict[str, int] = field(default_factory=dict)
    _plain: frozenset[str] = frozenset()  # parameters rebound by plain assignments only
    _first: dict[str, int] = field(default_factory=dict)  # parameter -> line of its 1st store
    _loops: tuple[tuple[int, int], ...] | None = None  # line spans of the body's loops
    _awaiting: frozenset[str] | None = None  # receivers of awaited method calls, as written
    walrus: bool = True  # the file may bind names inside expressions (``:=``)
    returned: list[str | None] = field(default_factory=list)  # types of ``return x``
    generator: bool = False  # a ``yield`` in the body: calling it returns a generator
    fds: dict[str, str] | None = None  # names bound once to a descriptor or pipe end
    once: int = 0  # inside ``if <module global> is None:`` blocks: a once-per-process memo
    fallback: int = 0  # inside clauses marked ``# pragma: no cover``: whether they run is a guess
    twins: frozenset[int] | None = None  # ids of sync calls returned beside a coroutine
    annotated: dict[str, str] | None = None  # parameters annotated with a builtin type
    # an async def's (positional parameters, keyword names): its calls of a parameter
    # run what its callers hand in (``ParamCall``)
    signature: tuple[tuple[str, ...], frozenset[str]] | None = None

    def _scan_stores(self) -> None:
        facts, node = self.facts, self.node
        names = facts.names | frozenset(facts.params) if facts is not None else frozenset()
        names |= self.attrs
        if node is None:
            self._stable = names
            return
        stores: dict[str, int] = {}
        other: set[str] = set()
        first: dict[str, int] = {}
        for n, plain in (walk_stores(node.body) if self.walrus else store_targets(node.body)):
            key = self._store_key(n)
            if key is None:
                continue
            stores[key] = stores.get(key, 0) + 1
            first[key] = min(first.get(key, 1 << 30), getattr(n, "lineno", 0))
            if not plain:
                other.add(key)
        self._counts = {k: (c if k not in other else c + 1) for k, c in stores.items()}
        self._stable = names - set(stores)
        self._plain = frozenset(names & (set(stores) - other))
        self._first = {k: v for k, v in first.items() if k in names}

    def unstored_at(self, test: ast.expr) -> frozenset[str]:
        """Parameters the body rebinds only after ``test`` (every store on a later line,
        and ``test`` in no loop): there the test still reads the value the caller passed
        (bacpypes' ``isinstance(addr, str)`` whose branch then splits ``addr``)."""
        self.stable_params()
        end = test.end_lineno or test.lineno
        late = frozenset(k for k, line in self._first.items() if line > end)
        if not late or self.node is None:
            return frozenset()
        if self._loops is None:
            self._loops = tuple((n.lineno, n.end_lineno or n.lineno) for n in walk(self.node)
                                if isinstance(n, ast.For | ast.AsyncFor | ast.While))
        if any(a <= test.lineno <= b for a, b in self._loops):
            return frozenset()
        return late

    def _store_key(self, n: ast.AST) -> str | None:
        """The parameter (or ``self.x``) a node binds, if it binds one."""
        if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
            return n.id
        if (isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load)
                and isinstance(n.value, ast.Name) and n.value.id == self.self_name):
            return f"self.{n.attr}"
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return n.name
        if isinstance(n, ast.ExceptHandler) and n.name:
            return n.name
        if isinstance(n, ast.alias):
            return (n.asname or n.name).partition(".")[0]
        if isinstance(n, ast.MatchAs | ast.MatchStar) and n.name:
            return n.name
        if isinstance(n, ast.MatchMapping) and n.rest:
            return n.rest
        return None

    def passes_kwargs_whole(self) -> bool:
        """``**kwargs`` is only ever spread into calls: never read, changed or rebound."""
        node = self.node
        if node is None or node.args.kwarg is None:
            return False
        name = node.args.kwarg.arg
        spread: set[int] = set()
        for stmt in node.body:
            for n in walk(stmt):
                if isinstance(n, ast.keyword) and n.arg is None:
                    spread.add(id(n.value))
        return all(id(n) in spread for stmt in node.body for n in walk(stmt)
                   if isinstance(n, ast.Name) and n.id == name)

    def awaits_methods_of(self, call: ast.Call, source: Callable[[int, int], str]) -> bool:
        """Whether the body awaits a method call on ``call``'s receiver (``await
        conn.set(k)``) or on ``call``'s result (``await conn.ft(i).info()``): then the
        receiver is an async object at run time, whatever its annotation says. One walk
        per function, and none for one whose ``source`` lines do not say ``await``."""
        if self._awaiting is None:
            node = self.node
            keys: set[str] = set()
            if node is not None and "await" in source(node.lineno,
                                                      node.end_lineno or node.lineno):
                for n in walk(node):
                    if type(n) is ast.Await and type(n.value) is ast.Call and type(
                            n.value.func) is ast.Attribute:
                        base = n.value.func.value
                        if type(base) is ast.Call:
                            keys.add(str(id(base)))
                            base = base.func.value if type(base.func) is ast.Attribute else base
                        keys.add(_dotted(base))
            self._awaiting = frozenset(keys - {""})
        receiver = call.func.value if type(call.func) is ast.Attribute else None
        return bool(self._awaiting) and (str(id(call)) in self._awaiting or (
            receiver is not None and _dotted(receiver) in self._awaiting))

    def stable_params(self) -> frozenset[str]:
        """Parameters the body never rebinds: they may be passed on as ``("p", x)``."""
        if self._stable is None:
            self._scan_stores()
        assert self._stable is not None
        return self._stable

    def guardable(self) -> frozenset[str]:
        """Parameters whose tests say something: never rebound, or rebound by plain
        assignments whose guards are recorded (``FuncFacts.rebinds``)."""
        return self.stable_params() | self._plain

    def stored(self, name: str) -> bool:
        """Bound anywhere in the body (an assignment, ``for``, ``with``, ``import``, a
        ``def``, ``except ... as``)."""
        self.stable_params()
        return name in self._counts

    def assigned_once(self, name: str) -> bool:
        """Bound by exactly one plain assignment in the body (and nowhere else)."""
        self.stable_params()
        return self._counts.get(name) == 1

    def rebinding(self, stmt: ast.Assign) -> str | None:
        """The parameter rebound by plain assignments that this one stores, if any."""
        if len(stmt.targets) != 1:
            return None
        self.stable_params()
        key = self._store_key(stmt.targets[0])
        return key if key in self._plain else None


class FileScanner(ast.NodeVisitor):
    """Walks one module once; see the module docstring for what it collects."""

    def __init__(self, path: str, module: str, source: bytes, catalog: Catalog, *,
                 is_package: bool = False, noqa: NoqaPolicy = DEFAULT_NOQA) -> None:
        self.result = FileResult(path=path, module=module)
        self.catalog = catalog
        self.tracker = ImportTracker(module, is_package=is_package, factories=catalog.factories,
                                     offloads=catalog.offload, aliases=catalog.aliases,
                                     objects=catalog.objects, attributes=catalog.attributes,
                                     elements=catalog.elements, modes=catalog.modes,
                                     memory=(catalog.in_memory_args, catalog.in_memory_names))
        self.source = source
        self.noqa = noqa
        self._lines: list[str] | None = None
        self._ctx: list[_Ctx] = []
        self._offloaded: set[int] = set()
        self._dups: set[str] = set()
        selection = catalog.selection
        self._sites = selection.any_of("chains") or selection.any_of("declared")
        handlers: dict[type, Any] = {
            ast.Module: self.visit_Module, ast.FunctionDef: self._visit_def,
            ast.AsyncFunctionDef: self._visit_def, ast.Lambda: self.visit_Lambda,
            ast.ClassDef: self.visit_ClassDef, ast.Call: self.visit_Call,
            ast.Await: self.visit_Await, ast.If: self.visit_If, ast.Assign: self.visit_Assign,
            ast.AugAssign: self.visit_AugAssign, ast.AnnAssign: self.visit_AnnAssign,
            ast.Return: self.visit_Return, ast.Expr: self._visit_expr,
            ast.Yield: self._visit_yield, ast.YieldFrom: self._visit_yield,
            ast.Attribute: self.visit_Attribute, ast.ExceptHandler: self.visit_ExceptHandler,
            ast.Try: self.visit_Try, ast.With: self.visit_With,
            ast.Subscript: self.visit_Subscript,
            ast.ListComp: self._visit_comprehension, ast.SetComp: self._visit_comprehension,
            ast.GeneratorExp: self._visit_comprehension,
            ast.DictComp: self._visit_comprehension,
        }
        # every node type: its handler, the generic walk, or None for a leaf (not entered)
        # (a cycle through ``self``: ``scan_source`` breaks it when done, so a finished
        # scanner is freed by reference counting, without the garbage collector)
        self._dispatch: dict[type, Any] = dict.fromkeys(_LEAF_TYPES)
        self._dispatch.update(dict.fromkeys(_WALKED_TYPES, self.generic_visit))
        self._dispatch.update(handlers)
        self._written: set[str] = set()
        self._classes: list[dict[str, dict[str, int]]] = []  # attr -> method -> stores
        self._class_nodes: list[ast.ClassDef] = []  # the classes being visited, innermost last
        self._main_names: frozenset[str] | None = None  # see _main_built
        self._module_node: ast.Module | None = None
        # lines marked ``# pragma: no cover``: an except / if / else clause they open is a
        # fallback (its findings low); a ``def`` marked so is read as usual
        self._no_cover = no_cover_lines(source) if b"no cover" in source else frozenset()
        self._properties: list[dict[str, tuple[str, ast.expr]]] = []
        self._consts: dict[str, object] = {}
        self._plain_defs: set[str] = set()
        self._walrus = b":=" in source
        # a default SSL context per connection needs ssl=True or a wss:// URL spelled here
        self._tls_text = b"ssl" in source or b"wss://" in source
        self.tracker.mode_text = any(k.encode() in source for k in self.tracker.mode_keywords)
        self._decorated: set[str] = set()  # qualnames of decorated defs (maybe not functions)
        # a name can hold a descriptor only if the file spells a call that makes one
        # (``os.pipe``, ``x.fileno``; a name imported bare is missed: it stays flagged)
        self._fd_text = any(n in source for n in _fd_needles(catalog))
        self._loop_text = running_loop.NEEDLE in source  # tests of a running loop
        self._address_text = address_probe.NEEDLE in source  # parses of an IP address
        # a def can start a thread on its argument only if the file spells a way to
        self._thread_text = any(n in source for n in _thread_needles(catalog))
        self._awaited: set[int] = set()
        self._dead: set[int] = set()  # coroutines a later def of the name replaced
        self._coroutines: frozenset[str] = frozenset()  # the module's async def names
        self._top_ctx: _Ctx | None = None  # module-level code, for the calls it makes
        # plain generator functions of the file seen so far (a call runs none of the body),
        # and calls whose result is not iterated where they are: dropped or returned
        # (``_unconsumed``), or handed to another callable (``_handed_on``)
        self._generators: set[str] = set()
        self._unconsumed: set[int] = set()
        self._handed_on: set[int] = set()
        self._scheduled: set[int] = set()  # calls awaited or handed to gather / create_task
        self._stored: set[int] = set()  # calls whose result is only bound to a target
        self._thread_decorators: dict[str, bool] = {}  # module-level def -> threads?
        self._called: set[int] = set()  # ids of the expressions called (``f`` of ``f()``)
        self._loop_lambdas: set[int] = set()  # lambdas handed to the loop to call
        self._urllib3 = False
        self._pipe_text = b"_pipe(" in source  # ``loop.connect_write_pipe(...)`` spelled
        self._pipe_wraps: set[int] = set()  # wraps only handed to a pipe transport

    # -- helpers ---------------------------------------------------------------------
    def _source_lines(self, first: int, last: int) -> str:
        self.line(first)
        assert self._lines is not None
        return "\n".join(self._lines[first - 1:last])

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
                extra: dict[str, str], unless: tuple[str, ...] = (),
                confidence: str = "high") -> None:
        """A finding; with ``unless`` it waits for the run to resolve those types."""
        if (not self.catalog.selection.enabled(code)
                or self.noqa.silences(code, self._noqa(node))):
            return
        text = message(code, call=call, func=ctx.display, **extra)
        finding = Finding(self.result.path, node.lineno, node.col_offset + 1, code, text,
                          ctx.qualname, self.line(node.lineno).strip(), confidence)
        if unless:
            self.result.pending.append(Pending(finding, unless))
        else:
            self.result.findings.append(finding)

    def _child_qualname(self, name: str) -> str:
        scope = self.tracker.stack[-1]
        sep = ".<locals>." if scope.kind == "function" else "."
        return f"{scope.qualname}{sep}{name}"

    def _display(self, qualname: str) -> str:
        local = qualname[len(self.result.module) + 1:]
        return local.rpartition("<locals>.")[2]

    # -- the walk: a type-keyed dispatch, cheaper than NodeVisitor's name lookup -------
    def visit(self, node: ast.AST) -> None:
        handler = self._dispatch.get(type(node), self.generic_visit)
        if handler is not None:
            handler(node)

    def generic_visit(self, node: ast.AST) -> None:
        """``ast.iter_child_nodes`` inlined: only the fields that can hold nodes, each child
        sent straight to its handler (leaves, and values that are no node, are skipped)."""
        dispatch = self._dispatch
        kind = type(node)
        fields = _CHILD_FIELDS.get(kind)
        for name in fields if fields is not None else _child_fields(kind):
            value = getattr(node, name, None)
            if type(value) is list:
                for child in value:
                    kind = type(child)
                    handler = dispatch.get(kind)
                    if handler is not None:
                        handler(child)
                    if kind in _EXIT_TYPES:  # the statements after it never run
                        self._unreachable(value, child)
                        break
            elif value is not None:
                handler = dispatch.get(type(value))
                if handler is not None:
                    handler(value)

    # -- scopes ----------------------------------------------------------------------
    def visit_Module(self, node: ast.Module) -> None:
        self._module_node = node
        self.tracker.push_module(node.body)
        self._urllib3 = any(b.kind == "import" and (b.target or "").partition(".")[0] == "urllib3"
                            for b in self.tracker.stack[-1].bindings.values())
        self._consts = module_constants(node.body)
        self._plain_defs = plain_defs(node.body)
        self._dead = shadowed_defs(node.body)
        self._coroutines = frozenset(st.name for st in node.body
                                     if isinstance(st, ast.AsyncFunctionDef))
        self.result.constants = {f"{self.result.module}.{k}": v for k, v in self._consts.items()}
        self.generic_visit(node)
        scope = self.tracker.pop()
        module = self.result.module
        self.result.reexports = {f"{module}.{name}": b.target
                                 for name, b in scope.bindings.items()
                                 if b.kind == "import" and b.target}
        for name, b in scope.bindings.items():  # ``auth = AuthHandler()``: what importers
            if b.kind == "var" and b.target and b.target != AMBIGUOUS:  # of ``auth`` call
                self.result.returns.setdefault(f"{module}.{name}", b.target)

    def _visit_def(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for expr in [*node.decorator_list, *node.args.defaults,
                     *(d for d in node.args.kw_defaults if d is not None)]:
            self.visit(expr)
        qualname = self._child_qualname(node.name)
        display = self._display(qualname)
        if node.decorator_list:
            self._decorated.add(qualname)
        protocol = (self._protocol_callback(node) if isinstance(node, ast.FunctionDef)
                    else False)
        if (isinstance(node, ast.AsyncFunctionDef) and not self._thread_decorated(node)
                and id(node) not in self._dead):
            ctx = _Ctx(qualname, display, on_loop=True, node=node,  # type: ignore[arg-type]
                       walrus=self._walrus, signature=self._parameters(node))
        elif isinstance(node, ast.AsyncFunctionDef):  # @work(thread=True) async def: the
            ctx = _Ctx(qualname, display, on_loop=False)  # worker thread's own loop runs it;
            # or a later def of the name replaced it before anything could call it
        elif self._offload_decorated(node):  # @sync_to_async def f(): calls return awaitables
            ctx = _Ctx(qualname, display, on_loop=False)
        elif protocol is True:  # the loop calls it: what it blocks on, it blocks
            ctx = _Ctx(qualname, f"{display} {PROTOCOL_CALLBACK}", on_loop=True,
                       node=node, walrus=self._walrus)
        else:
            facts = FuncFacts(display, self.result.path, node.lineno,
                              marked=declared.is_marked(node, self.tracker, self.catalog),
                              getter=self.tracker.is_property(node),
                              abstract=bool(self._class_nodes) and is_abstract(node))
            self._signature(node, facts)
            if node.decorator_list:
                facts.wrapped = self._unread_decorators(node)
            if (self._thread_text and node.args.args and self.tracker.stack[-1].kind == "module"
                    and any(type(st) in _DEFS for st in node.body)):  # a wrapper
                facts.threads = self._hands_to_thread(node)  # for other modules' defs
            if protocol is None:  # maybe a callback: the run looks for a protocol base
                self.result.callbacks.append(CallSite(
                    qualname, self.result.path, node.lineno, node.col_offset + 1,
                    f"{display} {PROTOCOL_CALLBACK}", qualname,
                    self.line(node.lineno).strip(), noqa_codes(self.line(node.lineno))))
            accessor = property_accessor(node)
            if accessor:  # @p.setter def p(...): kept apart, the getter keeps the name
                self.result.funcs[f"{qualname}#{accessor}"] = facts
            else:
                if qualname in self.result.funcs:
                    self._dups.add(qualname)
                self.result.funcs[qualname] = facts
            ctx = _Ctx(qualname, display, on_loop=False, facts=facts, node=node,
                       walrus=self._walrus)
            if self._loop_text and running_loop.is_getter(node, self.tracker.resolve):
                self.result.constants[qualname + LOOP_GETTER] = True
            self._method_attrs(node, ctx)
        if self._pipe_text:
            self._pipe_wraps.update(transport_wraps(node))
        scope = self.tracker.push_function(node, qualname)
        self._ctx.append(ctx)
        spreads = self.tracker.enter_modes(node)
        if scope.flow:  # a name re-declared with another type: typed statement by statement
            saved = self._dispatch
            self._dispatch = self._flow_dispatch(scope, self.tracker.flow_types(node.body, scope))
            try:
                self._visit_block(node.body)
            finally:
                self._dispatch = saved
        else:
            self._visit_block(node.body)
        self.tracker.mode_spreads = spreads
        self._ctx.pop()
        self.tracker.pop()
        self._note_return(node, qualname, ctx)
        if ctx.facts is not None and ctx.generator:  # @gen.coroutine def: yields on the loop
            ctx.facts.wrapped = ()
            if not node.decorator_list:  # not a @contextmanager: the body runs when iterated
                self._generators.add(qualname)
        if ctx.facts is not None and ctx.node is not None:
            for key in ctx.guardable() - ctx.stable_params():
                ctx.facts.rebinds.setdefault(key, ())  # stored where no guard was seen
            if ctx.init_values:
                ctx.facts.inits = dict(ctx.init_values)

    def _protocol_callback(self, node: ast.FunctionDef) -> bool | None:
        """A method the loop calls (``data_received``) of a subclass of an asyncio protocol:
        True when this file's classes show it, None when a base is defined elsewhere (the
        run decides, ``FileResult.callbacks``), False when it is no such method."""
        scope = self.tracker.stack[-1]
        if scope.cls is None or node.name not in self.catalog.protocol_methods:
            return False
        bases, elsewhere = self.tracker.ancestors(scope.cls.bases)
        if not bases.isdisjoint(self.catalog.protocol_types):
            return True
        return None if elsewhere else False

    def _flow_dispatch(self, scope: Scope,
                       records: dict[int, dict[str, str | None]]) -> dict[type, Any]:
        """The dispatch with every statement first setting the re-declared names to the
        types they have where it starts (``ImportTracker.flow_types``)."""
        base = self._dispatch

        def wrap(kind: type) -> Any:
            handler = base.get(kind)

            def visit(stmt: ast.stmt) -> None:
                env = records.get(id(stmt))
                if env is not None:
                    for name, typ in env.items():
                        scope.bindings[name] = Binding("var", typ)
                if handler is not None:
                    handler(stmt)
            return visit

        kinds = [k for k in vars(ast).values()
                 if isinstance(k, type) and issubclass(k, ast.stmt) and k is not ast.stmt]
        return {**base, **{k: wrap(k) for k in kinds}}

    def _note_return(self, node: ast.FunctionDef | ast.AsyncFunctionDef, qualname: str,
                     ctx: _Ctx) -> None:
        """What calling (or awaiting) the function gives, for ``returns.py``: its return
        annotation, else the one type every ``return x`` has (``return None`` and falling
        off the end read as ``Optional``, like the annotation), if no decorator may
        change the result and the body does not ``yield``. A getter's is what reading the
        property gives (``qualname#get``)."""
        if isinstance(node, ast.FunctionDef) and self.tracker.is_property(node):
            qualname += GETTER
        typ: str | None = None
        if node.returns is not None:
            typ = self.tracker.annotation_type(node.returns)
            if typ in _SELF_TYPES and self.tracker.stack[-1].kind == "class":
                typ = SELF_TYPE
        elif not ctx.generator and self._plain_result(node):
            found = set(ctx.returned)
            found.discard("None")
            if len(found) == 1:
                typ = found.pop()
        if typ is None or typ == AMBIGUOUS:
            if qualname in self.result.returns:
                self.result.returns[qualname] = AMBIGUOUS  # defined twice
            return
        old = self.result.returns.get(qualname)
        self.result.returns[qualname] = typ if old is None or old == typ else AMBIGUOUS

    def _plain_result(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        for deco in node.decorator_list:
            ref = self.tracker.resolve(deco.func if isinstance(deco, ast.Call) else deco)
            if ref is None or ref.name not in _RESULT_KEEPING | PROPERTY_DECORATORS:
                return False
        return True

    def _visit_expr(self, node: ast.Expr) -> None:
        if type(node.value) is ast.Call:
            self._unconsumed.add(id(node.value))
        self.visit(node.value)

    def visit_Return(self, node: ast.Return) -> None:
        if node.value is not None:
            self._unconsumed.add(id(node.value))
            ctx = self._ctx[-1] if self._ctx else None
            twins = self._twins(ctx, node.value)
            if twins and ctx is not None:  # a dispatcher's sync arm: not when awaited
                ret = node.value
                parts = [ret.test, ret.body, ret.orelse] if isinstance(
                    ret, ast.IfExp) else [ret]
                for part in parts:
                    self._under(_UNAWAITED if id(part) in twins else None, ctx,
                                partial(self.visit, part))
            else:
                self.visit(node.value)
        if not self._ctx:
            return
        value = node.value
        if value is None or (isinstance(value, ast.Constant) and value.value is None):
            self._ctx[-1].returned.append("None")
        elif self._receiver_class(value.func if isinstance(value, ast.Call) else value):
            self._ctx[-1].returned.append(SELF_TYPE)  # ``return cls(...)``, ``return self``
        else:
            self._ctx[-1].returned.append(self.tracker.value_type(value))

    def _twins(self, ctx: _Ctx | None, value: ast.expr) -> frozenset[int]:
        """The calls a sync def returns beside a coroutine (syntax.sync_twins), read on the
        def's first ``return`` of a call."""
        if (ctx is None or ctx.facts is None or ctx.node is None
                or type(value) not in (ast.Call, ast.IfExp)):
            return frozenset()
        if ctx.twins is None:
            ctx.twins = sync_twins(ctx.node, self._coroutines)
        return ctx.twins

    def _receiver_class(self, node: ast.expr) -> bool:
        """``self`` / ``cls`` of a method: whatever class the call was made on."""
        if not isinstance(node, ast.Name):
            return False
        ref = self.tracker.resolve(node)
        return ref is not None and ref.kind == "self"

    def _unreachable(self, stmts: list[Any], exit_stmt: ast.stmt) -> None:
        """The statements after a ``return`` / ``raise`` / ``continue`` / ``break`` in the
        same block never run, so they hold no finding and no chain edge; only a ``yield``
        among them still counts (``return; yield`` is the empty-generator idiom)."""
        if self._ctx and not self._ctx[-1].generator:
            rest = stmts[stmts.index(exit_stmt) + 1:]
            self._ctx[-1].generator = any(has_yield(stmt) for stmt in rest)

    def _visit_yield(self, node: ast.Yield | ast.YieldFrom) -> None:
        if self._ctx:
            self._ctx[-1].generator = True
        self.generic_visit(node)

    def _method_attrs(self, node: ast.FunctionDef, ctx: _Ctx) -> None:
        """``self.x`` as a parameter of a method when only ``__init__`` and the method
        assign it (and ``__init__`` does); in ``__init__``, track what it assigns."""
        assert ctx.facts is not None
        if not self._classes or self.tracker.stack[-1].kind != "class":
            return
        if not (node.args.posonlyargs or node.args.args) or any(
                isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod")
                for d in node.decorator_list):
            return
        ctx.self_name = [*node.args.posonlyargs, *node.args.args][0].arg
        stores = self._classes[-1]
        if node.name == "__init__":
            ctx.init_values = {}
            ctx.top = frozenset(id(stmt) for stmt in node.body)
            return
        ctx.attrs = frozenset(f"self.{attr}" for attr, where in stores.items()
                              if "__init__" in where and set(where) <= {"__init__", node.name})
        if ctx.attrs:
            ctx.facts.names |= ctx.attrs | {SELF}

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._stored.add(id(node.value))
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._stored.add(id(node.value))  # ``it = path.glob("*")``: a generator, not read yet
        self.generic_visit(node)
        for each in node.targets:
            self._note_written(each)
        ctx = self._ctx[-1] if self._ctx else None
        if ctx is None or ctx.node is None:
            return
        target = node.targets[0] if len(node.targets) == 1 else None
        if (isinstance(target, ast.Name) and isinstance(node.value, ast.Call)
                and ctx.assigned_once(target.id)):
            ref = self.tracker.resolve(node.value.func)
            if ref is not None and ref.kind in ("class", "import"):  # x = C(...): its state
                ctx.instances[target.id] = ("i", (ref.name, self._args(node.value, ctx)))
        if ctx.facts is None:
            return
        key = ctx.rebinding(node)
        if key is not None:
            seen = ctx.facts.rebinds.get(key)
            guard = tuple(ctx.guard)
            ctx.facts.rebinds[key] = guard if seen is None else either(seen, guard)
        if (ctx.init_values is not None and id(node) in ctx.top
                and isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)
                and target.value.id == ctx.self_name
                and self._classes[-1].get(target.attr, {}).get("__init__") == 1):
            value = self._value(node.value, ctx)
            if value != UNKNOWN:
                ctx.init_values[f"self.{target.attr}"] = value

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._note_written(node.target)
        self.generic_visit(node)

    def _note_written(self, target: ast.expr) -> None:
        """``obj.x = ...`` on anything but a method's own ``self``: ``x`` is no known state."""
        for n in walk(target):
            if (isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load)
                    and not (isinstance(n.value, ast.Name) and self._ctx
                             and n.value.id == self._ctx[-1].self_name)):
                self._written.add(n.attr)

    def _offload_decorated(self, node: ast.FunctionDef) -> bool:
        """``@sync_to_async``, ``@work(thread=True)`` or a decorator whose code starts a
        thread on the function: its body runs off the loop."""
        for deco in node.decorator_list:
            ref = self.tracker.resolve(deco.func if isinstance(deco, ast.Call) else deco)
            if ref is not None and ref.name in self.catalog.offload:
                return True
        return self._thread_decorated(node)

    def _unread_decorators(self, node: ast.FunctionDef) -> tuple[str, ...]:
        """The decorators of a sync def whose effect the lint does not know: not the standard
        library's, not the ``@blocking`` marker. The run decides which of them it has the
        code of (``ChainIndex.unread``); "?" is one it cannot name (``@self.pool.wrap``)."""
        out: list[str] = []
        for deco in node.decorator_list:
            ref = self.tracker.resolve(deco.func if isinstance(deco, ast.Call) else deco)
            if ref is None:
                out.append(UNNAMED)
            elif (ref.name.partition(".")[0] not in _STDLIB
                    and ref.name not in self.catalog.markers):
                out.append(ref.name)
        return tuple(out)

    def _thread_decorated(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """A decorator given ``thread=True``, or one whose code starts a thread on it."""
        return any((isinstance(deco, ast.Call) and in_thread(deco))
                   or self._threads_its_function(deco) for deco in node.decorator_list)

    def _parameters(self, node: ast.FunctionDef | ast.AsyncFunctionDef
                    ) -> tuple[tuple[str, ...], frozenset[str]]:
        """Positional parameters (without self / cls) and the names a keyword can give,
        for a def about to be entered."""
        args = node.args
        positional = [a.arg for a in [*args.posonlyargs, *args.args]]
        keywords = {a.arg for a in [*args.args, *args.kwonlyargs]}
        in_class = self.tracker.stack[-1].kind == "class"
        static = any(isinstance(d, ast.Name) and d.id == "staticmethod"
                     for d in node.decorator_list)
        if in_class and not static and positional:
            keywords.discard(positional.pop(0))
        return tuple(positional), frozenset(keywords)

    def _signature(self, node: ast.FunctionDef, facts: FuncFacts) -> None:
        """Positional parameters (without self / cls), keyword names, constant defaults."""
        args = node.args
        facts.params, facts.names = self._parameters(node)
        facts.varkw = args.kwarg is not None
        pairs = [*zip(reversed([*args.posonlyargs, *args.args]), reversed(args.defaults),
                      strict=False),
                 *((a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
                   if d is not None)]
        for a, default in pairs:
            value = self._value(default, None)
            if value != UNKNOWN:
                facts.defaults[a.arg] = value

    # -- guards ----------------------------------------------------------------------
    def _value(self, node: ast.expr, ctx: _Ctx | None, local: _Ctx | None = None) -> Value:
        """A constant, a module constant, a helper's own parameter (``ctx``), an object
        built in ``local`` from known arguments, or UNKNOWN."""
        if type(node) is ast.Constant:  # type tests: the parser's nodes are exact types
            return ("v", node.value) if isinstance(node.value, SIMPLE) else UNKNOWN
        if type(node) is ast.Dict and all(type(k) is ast.Constant and type(k.value) is str
                                          for k in node.keys):
            keys = tuple(sorted({str(k.value) for k in node.keys if isinstance(k, ast.Constant)}))
            return ("v", Kind("builtins.dict", keys))  # a fresh display: its keys are known
        if type(node) in KINDS:
            return ("v", Kind(KINDS[type(node)]))
        if type(node) in _DISPLAYS:  # [a, b]: its type and size (``if items:``) are known
            elts = node.elts  # type: ignore[attr-defined]
            starred = any(type(e) is ast.Starred for e in elts)
            return ("v", Kind(_DISPLAYS[type(node)], size=None if starred else len(elts)))
        if type(node) is ast.Call:
            ref = self.tracker.resolve(node.func)
            if ref is not None and ref.name in self.catalog.in_memory_types:
                return ("v", Kind(ref.name))  # io.BytesIO(...)
            if ref is not None and ref.kind in ("class", "import"):  # C(...): its state
                return ("i", (ref.name, self._args(node, ctx, local)))
            return UNKNOWN
        if type(node) is ast.Name and local is not None and node.id in local.instances:
            return local.instances[node.id]
        if type(node) is ast.UnaryOp and type(node.op) is ast.USub:
            inner = self._value(node.operand, None)
            if inner[0] == "v" and type(inner[1]) in (int, float):
                return ("v", -inner[1])  # type: ignore[operator]
            return UNKNOWN
        if type(node) is ast.Name:
            if ctx is not None and node.id in ctx.stable_params():
                return ("p", node.id)
            binding = self.tracker.lookup(node.id)
            module = self.tracker.stack[0].bindings.get(node.id)
            if binding is not None and binding is module and node.id in self._consts:
                return ("v", self._consts[node.id])
            if binding is not None and binding is module and node.id in self._plain_defs:
                # an undecorated module-level def
                return ("v", Kind("types.FunctionType", target=binding.target))
            if (binding is not None and binding is not module and binding.kind == "def"
                    and binding.target not in self._decorated):
                # a nested def: a function, no str
                return ("v", Kind("types.FunctionType", target=binding.target))
        if type(node) is ast.Name and (kind := self._annotated(node.id)) is not None:
            return ("v", Kind(kind))  # ``addr: tuple[str, int]``: no str, whatever it holds
        if isinstance(node, ast.Name | ast.Attribute):
            ref = self.tracker.resolve(node)
            if ref is not None and ref.kind == "import":
                return ("s", ref.name)
            if (ref is not None and ref.kind == "def" and isinstance(node, ast.Attribute)
                    and ref.name not in self._decorated):
                return ("v", Kind("types.MethodType", target=ref.name))  # self.save
        return UNKNOWN

    def _annotated(self, name: str) -> str | None:
        """The builtin type a parameter of the current function is annotated with (``addr:
        Tuple[str, int]``, ``data: bytes``), when the body never rebinds it and it is not
        optional (no ``None`` default): what an ``isinstance`` test of its value gives."""
        ctx = self._ctx[-1] if self._ctx else None
        if ctx is None or ctx.node is None:
            return None
        if ctx.annotated is None:
            ctx.annotated = self._builtin_params(ctx)
        return ctx.annotated.get(name)

    def _builtin_params(self, ctx: _Ctx) -> dict[str, str]:
        """``_annotated`` for every parameter of ``ctx``'s function, read once."""
        assert ctx.node is not None
        args = ctx.node.args
        positional = [*args.posonlyargs, *args.args]
        optional = {a.arg for a, d in zip(reversed(positional), reversed(args.defaults),
                                          strict=False) if is_none(d)}
        optional |= {a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
                     if is_none(d)}
        out: dict[str, str] = {}
        for arg in [*positional, *args.kwonlyargs]:
            ann = arg.annotation
            if ann is None or arg.arg in optional:
                continue
            ref = self.tracker.resolve(ann.value if isinstance(ann, ast.Subscript) else ann)
            kind = _BUILTIN_ANNOTATIONS.get(ref.name.removeprefix("typing.")) if ref else None
            if kind is not None and not ctx.stored(arg.arg):  # the body's walk: last
                out[arg.arg] = kind
        return out

    def _atoms(self, test: ast.expr, ctx: _Ctx) -> Guard | None:
        if self._loop_text and ctx.node is not None:
            loop = running_loop.guard(test, self.tracker.resolve,
                                      lambda e: self._bound_once(e, ctx, test),
                                      lambda t: self._atoms(t, ctx))
            if loop is not None:
                return loop
        params = ctx.guardable() | ctx.unstored_at(test)
        if not params:
            return None
        aliases: dict[str, str] = {}
        if ctx.self_name is not None and self._classes:
            test = inline_properties(test, ctx.self_name, self._properties[-1])
            if ctx.init_values is not None:  # in __init__: self.x is the parameter it holds
                stores = self._classes[-1]
                aliases = {k: str(v[1]) for k, v in ctx.init_values.items()
                           if v[0] == "p" and set(stores.get(k[5:], {})) == {"__init__"}}
        return atoms(test, lambda e: self._value(e, None), params, self._type_name,
                     ctx.self_name, aliases)

    def _bound_once(self, node: ast.expr, ctx: _Ctx, before: ast.expr) -> ast.expr | None:
        """The value of the one binding of a name or ``self.x`` in the function, when it
        is a plain assignment before ``before``, or a probe's (running_loop.py)."""
        if ctx.node is None or not isinstance(node, ast.Name | ast.Attribute):
            return None
        key = ast.unparse(node)
        for stmt in ctx.node.body:
            if (isinstance(stmt, ast.Try) and stmt.lineno < before.lineno
                    and running_loop.probed(stmt, key, self.tracker.resolve)):
                values = list(bindings_of(ctx.node, key))
                return running_loop.PROBED if len(values) == 2 else None
        if not any(isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                   and isinstance(stmt.value, ast.Call | ast.IfExp)
                   and type(stmt.targets[0]) is type(node)
                   and ast.unparse(stmt.targets[0]) == key for stmt in ctx.node.body):
            return None  # cheap first: a top-level assignment of a call (else no walk)
        values = list(bindings_of(ctx.node, key))
        if len(values) != 1 or values[0] is None or values[0].lineno >= before.lineno:
            return None
        return values[0]

    def _type_name(self, node: ast.expr) -> str | None:
        ref = self.tracker.resolve(node)
        return ref.name if ref is not None and ref.kind in ("builtin", "import") else None

    def _args(self, node: ast.Call, ctx: _Ctx | None, local: _Ctx | None = None) -> Args:
        """What guards need of a call's arguments; ``ctx`` (a sync helper) lets its own
        parameters pass on as ``("p", x)``, ``local`` (any scope) its objects' states."""
        local = local or ctx
        spread = [k for k in node.keywords if k.arg is None]
        forward = False
        if spread and ctx is not None and ctx.node is not None and len(spread) == 1:
            kwarg = ctx.node.args.kwarg
            forward = (kwarg is not None and isinstance(spread[0].value, ast.Name)
                       and spread[0].value.id == kwarg.arg and ctx.passes_kwargs_whole())
        if any(isinstance(a, ast.Starred) for a in node.args):
            return OPAQUE
        more = bool(spread) and not forward  # f(x, key=v, **opts): key is still known
        func = node.func
        if isinstance(func, ast.Attribute):
            base = self.tracker.resolve(func.value)
            if base is not None and base.kind == "class":  # C.method(obj, ...): unbound
                return OPAQUE
        scope = ctx if ctx is not None and ctx.facts is not None else None
        keywords = tuple((str(k.arg), self._value(k.value, scope, local))
                         for k in node.keywords if k.arg is not None)
        if isinstance(func, ast.Attribute):
            if (scope is not None and isinstance(func.value, ast.Name)
                    and func.value.id == scope.self_name):
                if scope.init_values:
                    keywords += tuple(scope.init_values.items())  # self.m() from __init__
            else:
                receiver = self._value(func.value, scope, local)
                if receiver[0] in ("p", "i"):
                    keywords += ((SELF, receiver),)
        return Args(tuple(self._value(a, scope, local) for a in node.args), keywords,
                    forward=forward, more=more)

    def _narrowed(self, test: ast.expr, stmts: list[ast.stmt],
                  negated: bool = False) -> tuple[str, str] | None:
        """``(x, T)`` when ``test`` is ``isinstance(x, T)`` (``not isinstance`` with
        ``negated``) for a name ``x`` that ``stmts`` do not rebind, and ``T`` one type."""
        if negated:
            if not (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)):
                return None
            test = test.operand
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and not negated:
            test = test.values[0]
        if not (isinstance(test, ast.Call) and isinstance(test.func, ast.Name)
                and test.func.id == "isinstance" and len(test.args) == 2 and not test.keywords
                and isinstance(test.args[0], ast.Name) and self._ctx):
            return None
        ref = self.tracker.resolve(test.func)
        if ref is None or ref.name != "builtins.isinstance":
            return None
        typ = self.tracker.annotation_type(test.args[1])
        name = test.args[0].id
        if typ is None or typ == AMBIGUOUS:
            return None
        stores = walk_stores(stmts) if self._walrus else store_targets(stmts)
        if any(isinstance(n, ast.Name) and n.id == name for n, _ in stores):
            return None
        return name, typ

    def visit_If(self, node: ast.If) -> None:
        node = live_clauses(node)
        self.visit(node.test)
        body_fallback, else_fallback = self._fallback_clauses(node)
        ctx = self._ctx[-1] if self._ctx else None
        guard = self._atoms(node.test, ctx) if ctx is not None and ctx.facts is not None else None
        narrow = self._narrowed(node.test, node.body)
        if narrow is not None:  # isinstance(x, httpx.Client): x is one inside the branch
            old = self.tracker.narrow(*narrow)
        memo = ctx if ctx is not None and self._memo_test(node.test) else None
        if ctx is None or not guard:
            self._clause(body_fallback, lambda: self._visit_body(node.body, memo))
            if narrow is not None:
                self.tracker.widen(narrow[0], old)
            self._clause(else_fallback, lambda: self._visit_block(node.orelse))
            return
        ctx.guard.extend(guard)
        self._clause(body_fallback, lambda: self._visit_body(node.body, memo))
        if narrow is not None:
            self.tracker.widen(narrow[0], old)
        del ctx.guard[-len(guard):]
        negated = [guard[0].negated()] if len(guard) == 1 else []
        ctx.guard.extend(negated)
        self._clause(else_fallback, lambda: self._visit_block(node.orelse))
        del ctx.guard[len(ctx.guard) - len(negated):]

    def _fallback_clauses(self, node: ast.If) -> tuple[bool, bool]:
        """Whether the body / the else of this if is marked ``# pragma: no cover``."""
        if not self._no_cover:
            return False, False
        orelse = False
        if node.orelse and node.body and not (len(node.orelse) == 1
                                              and isinstance(node.orelse[0], ast.If)
                                              and node.orelse[0].col_offset == node.col_offset):
            end = node.body[-1].end_lineno or node.body[-1].lineno
            orelse = any(n in self._no_cover for n in range(end + 1, node.orelse[0].lineno))
        return node.lineno in self._no_cover, orelse

    def _clause(self, fallback: bool, visit: Any) -> None:
        if fallback:
            self._as_fallback(visit)
        else:
            visit()

    def _visit_body(self, body: list[ast.stmt], memo: _Ctx | None) -> None:
        """An if's body; under a memo test (``memo``: the function's context) its calls
        run once per process."""
        if memo is None:
            self._visit_block(body)
            return
        memo.once += 1
        try:
            self._visit_block(body)
        finally:
            memo.once -= 1

    def _memo_test(self, test: ast.expr) -> bool:
        """``G is None`` for a module-level name ``G``: the body fills a process-wide memo
        (``if _default is None: _default = load()``), so it runs once per process. So does
        a singleton's class attribute (``if cls._instance is None``, ``if not hasattr(C,
        "_instance") or C._instance is None``: ``C.instance()`` builds it once)."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
            return all(self._memo_test(v) for v in test.values)
        if (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
                and isinstance(test.operand, ast.Call)
                and isinstance(test.operand.func, ast.Name) and test.operand.func.id == "hasattr"
                and len(test.operand.args) == 2):
            return self._class_named(test.operand.args[0])
        if not (isinstance(test, ast.Compare)
                and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is)
                and isinstance(test.comparators[0], ast.Constant)
                and test.comparators[0].value is None):
            return False
        if isinstance(test.left, ast.Attribute):
            return self._class_named(test.left.value)
        if not isinstance(test.left, ast.Name):
            return False
        name = test.left.id
        module = self.tracker.stack[0].bindings.get(name)
        if module is None:
            return False
        if self.tracker.lookup(name) is module:
            return True
        node = self._ctx[-1].node if self._ctx else None  # ``global G`` in this function
        return node is not None and any(isinstance(n, ast.Global) and name in n.names
                                        for n in ast.walk(node))

    def _class_named(self, node: ast.expr) -> bool:
        """``cls`` in a classmethod, or a class of the module by its name."""
        if not isinstance(node, ast.Name):
            return False
        ctx = self._ctx[-1] if self._ctx else None
        if node.id == "cls" and ctx is not None and ctx.node is not None:
            return any(isinstance(d, ast.Name) and d.id == "classmethod"
                       for d in ctx.node.decorator_list)
        binding = self.tracker.stack[0].bindings.get(node.id)
        return binding is not None and binding.kind == "class"

    def _visit_block(self, stmts: list[ast.stmt]) -> None:
        """Statements in order; after ``if <test>: ... return`` the rest runs only when the
        test is false, so it is guarded by the negated test."""
        ctx = self._ctx[-1] if self._ctx else None
        pushed = 0
        narrowed: list[tuple[str, Any]] = []
        for i, stmt in enumerate(stmts):
            self.visit(stmt)
            if type(stmt) in _EXIT_TYPES:
                self._unreachable(stmts, stmt)
                break
            if isinstance(stmt, ast.If) and always_exits(stmt):
                break  # ``if True: return``: the rest of the block cannot run
            exits = (isinstance(stmt, ast.If) and not stmt.orelse and stmt.body
                     and isinstance(stmt.body[-1], EXITS))
            if not exits:
                continue
            assert isinstance(stmt, ast.If)
            # if not isinstance(x, T): raise ...  -> x is a T in the rest of the block
            narrow = self._narrowed(stmt.test, stmts[i + 1:], negated=True)
            if narrow is not None:
                narrowed.append((narrow[0], self.tracker.narrow(*narrow)))
            if ctx is not None and ctx.facts is not None:
                guard = self._atoms(stmt.test, ctx)
                if guard is not None and len(guard) == 1:
                    ctx.guard.append(guard[0].negated())
                    pushed += 1
        for name, old in reversed(narrowed):
            self.tracker.widen(name, old)
        if pushed and ctx is not None:
            del ctx.guard[-pushed:]

    visit_FunctionDef = _visit_def
    visit_AsyncFunctionDef = _visit_def

    def visit_Try(self, node: ast.Try) -> None:
        """A probe of the running loop (``try: asyncio.get_running_loop()``): its ``except
        RuntimeError`` clauses run only when no loop runs (running_loop.py). A parse of a
        parameter as an IP address (``try: ip_address(host)``): its ``except ValueError``
        runs only for a host name, its ``else`` only for an address (address_probe.py)."""
        ctx = self._ctx[-1] if self._ctx else None
        if ctx is None or ctx.facts is None:
            self.generic_visit(node)
            return
        resolve = self.tracker.resolve
        handled: list[Atom | None] = []
        orelse: Atom | None = None
        if self._loop_text and running_loop.probe(node, resolve) is not None:
            handled = [Atom(LOOP, "falsy") if running_loop.loopless(h, resolve) else None
                       for h in node.handlers]
        elif self._address_text and (param := address_probe.parsed(
                node, resolve, lambda e: self._guarded_param(e, ctx))) is not None:
            handled, orelse = address_probe.guards(node, param, resolve)
        if not handled:
            self.generic_visit(node)
            return
        for stmt in node.body:
            self.visit(stmt)
        for handler, atom in zip(node.handlers, handled, strict=True):
            self._under(atom, ctx, partial(self.visit, handler))
        self._under(orelse, ctx, lambda: self._visit_block(node.orelse))
        for stmt in node.finalbody:
            self.visit(stmt)

    def _under(self, atom: Atom | None, ctx: _Ctx, visit: Callable[[], None]) -> None:
        if atom is not None:
            ctx.guard.append(atom)
        try:
            visit()
        finally:
            if atom is not None:
                ctx.guard.pop()

    @staticmethod
    def _guarded_param(node: ast.expr, ctx: _Ctx) -> str | None:
        """A parameter whose value a call site can know (``ctx.guardable``)."""
        return node.id if isinstance(node, ast.Name) and node.id in ctx.guardable() else None

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.lineno in self._no_cover:  # ``except ...:  # pragma: no cover``
            self._as_fallback(lambda: self.generic_visit(node))
        else:
            self.generic_visit(node)

    def _as_fallback(self, visit: Any) -> None:
        """Visit a clause the project excludes from coverage (a defensive fallback:
        ``except NotImplementedError:  # pragma: no cover``): read like any other code,
        its findings are low confidence, since whether it ever runs is a guess."""
        ctx = self._ctx[-1] if self._ctx else None
        if ctx is None:
            visit()
            return
        ctx.fallback += 1
        try:
            visit()
        finally:
            ctx.fallback -= 1

    def _visit_comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp
                             | ast.DictComp) -> None:
        """``[p.read_text() for p in root.glob("*")]``: the variable has the type of the
        items (``ImportTracker.element_type``) while the comprehension is walked."""
        narrowed: list[tuple[str, Any]] = []
        for gen in node.generators:
            self.visit(gen.iter)
            typ = (self.tracker.element_type(gen.iter)
                   if isinstance(gen.target, ast.Name) else None)
            if typ is not None:
                assert isinstance(gen.target, ast.Name)
                narrowed.append((gen.target.id, self.tracker.narrow(gen.target.id, typ)))
            for cond in gen.ifs:
                self.visit(cond)
        for part in ((node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,)):
            self.visit(part)
        for name, old in reversed(narrowed):
            self.tracker.widen(name, old)

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for expr in [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]:
            self.visit(expr)
        parent = self._ctx[-1] if self._ctx else None
        on_loop = (parent is not None and parent.on_loop and id(node) not in self._offloaded
                   or id(node) in self._loop_lambdas)
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
        scope = self.tracker.push_class(node, self._child_qualname(node.name))
        info = scope.cls
        assert info is not None  # push_class always makes one
        if info.bases:
            self.result.bases[info.qualname] = info.bases
        if info.shadows:
            self.result.shadows[info.qualname] = info.shadows
        for name, typ in info.attrs.items():  # x.attr on an instance, self.attr in a subclass
            if typ and typ != AMBIGUOUS and name not in info.methods:
                self.result.returns[f"{info.qualname}.{name}{GETTER}"] = typ
        if self.tracker.is_typed_dict(info):  # d["field"] / d.get("field") on a TypedDict
            for name, typ in info.attrs.items():
                if typ and typ != AMBIGUOUS:
                    for accessor in ("__getitem__", "get"):
                        self.result.returns[item_type(f"{info.qualname}.{accessor}", name)] = typ
        self._dead |= shadowed_defs(node.body)
        self._classes.append(attribute_stores(node))
        self._class_nodes.append(node)
        self._properties.append(simple_properties(node))
        for stmt in node.body:
            self.visit(stmt)
        self._classes.pop()
        self._class_nodes.pop()
        self._properties.pop()
        self.tracker.pop()
        self._constructor_site(node, info.qualname)

    def _constructor_site(self, node: ast.ClassDef, qualname: str) -> None:
        """The constructor of a public class with async methods, as a call made on the
        loop: an async API's users build it in their coroutines (an application's async
        setup), which the library's own code never shows."""
        if node.name.startswith("_") or self.tracker.stack[-1].kind != "module":
            return
        if not any(isinstance(stmt, ast.AsyncFunctionDef) for stmt in node.body):
            return
        if node.name in self._main_built():
            return  # a script's class, built by its sync ``__main__`` code: not an async API
        for init in node.body:  # a dataclass's or attrs class's hook runs in its __init__
            if isinstance(init, ast.FunctionDef) and init.name in CONSTRUCTORS:
                callee = f"{qualname}.{init.name}"
                self.result.sites.append(CallSite(
                    callee, self.result.path, init.lineno, init.col_offset + 1,
                    f"{node.name}(...) {CONSTRUCTOR}", callee, self.line(init.lineno).strip(),
                    noqa_codes(self.line(init.lineno)), low=True))

    def _main_built(self) -> frozenset[str]:
        """Names this file calls in its ``if __name__ == "__main__":`` block, or in the sync
        module functions that block calls (``main()``), when no coroutine of the file calls
        them too: the classes a script builds in sync code before any loop runs."""
        if self._main_names is not None:
            return self._main_names
        self._main_names = frozenset()
        module = self._module_node
        if module is None or b"__main__" not in self.source:
            return self._main_names
        blocks = [st for st in module.body if isinstance(st, ast.If) and is_main_test(st.test)]
        if not blocks:
            return self._main_names
        sync = {st.name: st for st in module.body if isinstance(st, ast.FunctionDef)}
        called = {n for b in blocks for n in called_names(b)}
        built = set(called)
        for name in called & set(sync):
            built |= called_names(sync[name])
        on_loop = {n for st in ast.walk(module) if isinstance(st, ast.AsyncFunctionDef)
                   for n in called_names(st)}
        self._main_names = frozenset(built - on_loop)
        return self._main_names

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

    def _callable_arg(self, node: ast.Call, index: int | None) -> ast.expr | None:
        """The callable a wrapper is handed at ``index`` (or by its usual keyword,
        ``run_in_executor(executor=pool, func=f)``), ``functools.partial`` unwrapped."""
        if index is None:
            return None
        arg: ast.expr | None = node.args[index] if len(node.args) > index else next(
            (k.value for k in node.keywords if k.arg in _CALLABLE_KEYWORDS), None)
        if arg is None:
            return None
        if isinstance(arg, ast.Call) and arg.args:
            inner = self.tracker.resolve(arg.func)
            if inner is not None and inner.name == PARTIAL:
                arg = arg.args[0]
        return arg

    def _mark_offloaded(self, node: ast.Call, ref: Ref | None) -> None:
        arg = self._callable_arg(node, self._offload_index(node, ref))
        if isinstance(arg, ast.Lambda):
            self._offloaded.add(id(arg))
        if in_thread(node):  # run_worker(lambda: ..., thread=True): a worker thread runs it
            self._offloaded.update(id(a) for a in node.args if isinstance(a, ast.Lambda))

    def _threads_its_function(self, deco: ast.expr) -> bool:
        """A decorator of this module whose code hands the function it wraps to a thread
        (``threading.Thread(target=fn)``, an [offload] call or method): read from its
        ``def``, not from its name."""
        ref = self.tracker.resolve(deco.func if isinstance(deco, ast.Call) else deco)
        if ref is None or ref.kind != "def" or self._module_node is None:
            return False
        return self._threads_local(ref.name.removeprefix(f"{self.result.module}."))

    def _threads_local(self, local: str) -> bool:
        """Whether the module-level def ``local`` hands a function it is given to a thread
        (memoised: a decorator is asked once per def it decorates)."""
        found = self._thread_decorators.get(local)
        if found is None:
            assert self._module_node is not None
            self._thread_decorators[local] = False  # a cycle of helpers hands nothing
            found = self._thread_decorators[local] = any(
                isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef)
                and stmt.name == local and self._hands_to_thread(stmt)
                for stmt in self._module_node.body)
        return found

    def _hands_to_thread(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """Its code hands a function it is given (a parameter, or ``functools.partial`` of
        one) to a thread: directly, or through another def of the module that does
        (``await run_in_executor(self, func, *args)``)."""
        given = {a.arg for n in walk(node)
                 if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
                 for a in [*n.args.posonlyargs, *n.args.args, *n.args.kwonlyargs]}
        given |= {t.id for n in walk(node) if isinstance(n, ast.Assign)
                  and isinstance(n.value, ast.Call) and n.value.args
                  and isinstance(n.value.args[0], ast.Name) and n.value.args[0].id in given
                  and (r := self.tracker.resolve(n.value.func)) is not None
                  and r.name == PARTIAL
                  for t in n.targets if isinstance(t, ast.Name)}
        module = f"{self.result.module}."
        for n in walk(node):
            if not isinstance(n, ast.Call):
                continue
            ref = self.tracker.resolve(n.func)
            if (ref.name if ref is not None else ast.unparse(n.func)) == THREAD:
                handed: ast.expr | None = next(
                    (k.value for k in n.keywords if k.arg == "target"), None)
            else:
                handed = self._callable_arg(n, self._offload_index(n, ref))
            if isinstance(handed, ast.Name) and handed.id in given:
                return True
            if (ref is not None and ref.kind == "def" and ref.name.startswith(module)
                    and "." not in ref.name[len(module):]
                    and any(isinstance(a, ast.Name) and a.id in given
                            for a in [*n.args, *(k.value for k in n.keywords)])
                    and self._threads_local(ref.name[len(module):])):
                return True
        return False

    def visit_Await(self, node: ast.Await) -> None:
        self._awaited.add(id(node.value))
        self._scheduled.add(id(node.value))
        self.generic_visit(node)

    def visit_With(self, node: ast.With) -> None:
        """``with self._lock: await ...`` on a thread lock: the next task that takes it
        while the holder waits blocks the loop's thread, and the holder can never resume
        to release it (a deadlock). Held without an await, the lock waits only for other
        threads, which the lint cannot see: not reported."""
        ctx = self._ctx[-1] if self._ctx else None
        if ctx is not None and ctx.on_loop:
            locks = [item.context_expr for item in node.items
                     if self._thread_lock(item.context_expr)]
            if locks and suspends(node.body):  # the body's walk only for a lock
                for lock in locks:
                    held = f"`with {ast.unparse(lock)}:` (a thread lock held across an await)"
                    self._report("COB108", lock, ctx, held, catalogued.NO_FIELDS)
        if ctx is not None:
            for item in node.items:
                self._implicit(item.context_expr, "__enter__", [], ctx)
        self.generic_visit(node)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        if (self._ctx and type(node.ctx) is ast.Load
                and type(node.value) in (ast.Name, ast.Attribute)):
            self._implicit(node.value, "__getitem__", [node.slice], self._ctx[-1])
        self.generic_visit(node)

    def _implicit(self, expr: ast.expr, method: str, args: list[ast.expr], ctx: _Ctx) -> None:
        """The calls Python makes for the code: ``with obj:`` runs ``type(obj).__enter__``,
        ``obj[k]`` its ``__getitem__``, ``len(obj)`` its ``__len__``. A project class's, that
        waits for a lock or reads a file, blocks where the code is (as ``obj.__enter__()``
        would); builtins and catalogued types are left to the catalog."""
        held = self.tracker.resolve(expr)
        if (held is None or held.kind != "instance" or not held.type
                or held.type in self.catalog.objects):
            return  # most items: a file, a lock, a dict, a catalogued client, unknown
        func = ast.copy_location(ast.Attribute(value=expr, attr=method, ctx=ast.Load()), expr)
        ref = self.tracker.resolve(func)
        if (ref is not None and ref.kind == "method" and ref.type is not None
                and ref.type not in self.catalog.objects):
            self._classify(ast.copy_location(ast.Call(func=func, args=args, keywords=[]), expr),
                           ref, ctx)

    def _thread_lock(self, expr: ast.expr) -> bool:
        """``expr.acquire()`` would be a catalogued wait on another thread (COB108)."""
        ref = self.tracker.resolve(ast.Attribute(value=expr, attr="acquire", ctx=ast.Load()))
        hit = catalogued.classify(ref, self.catalog) if ref is not None else None
        return hit is not None and hit[0] == "COB108"

    def _schedule(self, node: ast.Call, ref: Ref | None) -> None:
        """``asyncio.gather(f(), ...)``, ``wait_for(f(), t)``, ``create_task(f())`` (any
        receiver's): the calls handed to them must return awaitables, as if awaited."""
        if ((ref is not None and ref.name in _AWAITING) or (
                isinstance(node.func, ast.Attribute) and node.func.attr in _AWAITING_METHODS)):
            self._scheduled.update(id(a) for a in node.args if type(a) is ast.Call)

    def _flush_state(self, node: ast.Call, ref: Ref, ctx: _Ctx) -> str | None:
        """For ``fh.close()`` / ``fh.flush()`` on a file object: whether it has anything
        to flush (file_modes.py); None for every other call."""
        if (ref.attr not in FLUSHING or ref.type != FILE_TYPE
                or not isinstance(node.func, ast.Attribute)):
            return None
        key = ast.unparse(node.func.value)
        args = ctx.node.args.args if ctx.node is not None else []
        if (isinstance(node.func.value, ast.Attribute) and self._class_nodes and args
                and key.startswith(f"{args[0].arg}.")):
            scope: ast.AST | None = self._class_nodes[-1]  # self.x: bound anywhere in the class
        else:
            scope = ctx.node
        return flush_state(scope, key, self.tracker.resolve)

    def _fds(self, ctx: _Ctx) -> dict[str, str]:
        """Names the function binds once to a descriptor (``fd = os.dup(x)``,
        ``fd = sock.fileno()``) or a pipe end (``r, w = os.pipe()``), for ``[descriptors]``."""
        if ctx.fds is not None:
            return ctx.fds
        ctx.fds = {}
        if ctx.node is None or not self._fd_text:
            return ctx.fds
        args = ctx.node.args
        stores = Counter(a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs])
        assigns: list[tuple[ast.expr, ast.expr]] = []
        for stmt in walk(ctx.node):
            if isinstance(stmt, ast.Name) and not isinstance(stmt.ctx, ast.Load):
                stores[stmt.id] += 1
            elif (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                    and isinstance(stmt.value, ast.Call | ast.Name)):
                assigns.append((stmt.targets[0], stmt.value))
            elif isinstance(stmt, ast.withitem) and isinstance(stmt.context_expr, ast.Call):
                if stmt.optional_vars is not None:
                    assigns.append((stmt.optional_vars, stmt.context_expr))
        later: list[tuple[ast.expr, ast.expr]] = []
        for target, value in assigns:
            if not isinstance(value, ast.Call):
                later.append((target, value))
                continue
            ref = self.tracker.resolve(value.func)
            name = ref.name if ref is not None else ""
            if isinstance(target, ast.Tuple) and name in self.catalog.pipes:
                bound = {e.id: catalogued.PIPE for e in target.elts if isinstance(e, ast.Name)}
            elif isinstance(target, ast.Name) and (
                    name in self.catalog.fd_factories or catalogued.is_descriptor(value, {})):
                bound = {target.id: catalogued.FD}
            elif isinstance(target, ast.Name):
                later.append((target, value))  # ``f = open(r)``: once pipe ends are known
                continue
            else:
                continue
            ctx.fds.update((k, v) for k, v in bound.items() if stores[k] == 1)
        for _ in range(3):  # ``fd = r``, then ``f = os.fdopen(fd)``: short rebinding chains
            grew = False
            for target, value in later:
                if (isinstance(target, ast.Name) and stores[target.id] == 1
                        and target.id not in ctx.fds and self._piped(value, ctx.fds)):
                    ctx.fds[target.id] = (catalogued.PIPE if isinstance(value, ast.Name)
                                          else catalogued.PIPE_FILE)
                    grew = True
            if not grew:
                break
        return ctx.fds

    def _piped(self, node: ast.expr, fds: Mapping[str, str]) -> bool:
        """Whether ``node`` is a pipe end made in this function (a name bound to one) or a
        file object wrapped around one (``open(r)``, ``os.fdopen(w, "wb")``)."""
        if isinstance(node, ast.Name):
            return fds.get(node.id) in (catalogued.PIPE, catalogued.PIPE_FILE)
        if not isinstance(node, ast.Call) or not node.args:
            return False
        ref = self.tracker.resolve(node.func)
        first = node.args[0]
        return (ref is not None and ref.name in OPENERS and isinstance(first, ast.Name)
                and fds.get(first.id) == catalogued.PIPE)

    def _on_pipe(self, node: ast.Call, ref: Ref, ctx: _Ctx) -> bool:
        """A catalogued call acting on a pipe this function made: its descriptor argument is
        a pipe end (``os.read(r, n)``, ``os.fdopen(r)``), or it is a file object's method on
        a file wrapped around one (``open(r).read()``). No disk I/O: whether it waits depends
        on the other end, a guess (medium)."""
        if not self._fd_text or ctx.node is None:
            return False
        if (ref.kind == "method" and ref.type == FILE_TYPE
                and isinstance(node.func, ast.Attribute)):
            return self._piped(node.func.value, self._fds(ctx))
        first = node.args[0] if node.args else None
        return (isinstance(first, ast.Name)
                and self._fds(ctx).get(first.id) == catalogued.PIPE)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        """``x.p`` read (not called) where code runs: a call of ``p`` if it resolves to a
        property's getter project-wide (``READ``); its receiver is walked either way."""
        if type(node.ctx) is ast.Load and self._ctx and id(node) not in self._called:
            self._read(node, self._ctx[-1])
        handler = self._dispatch.get(type(node.value))
        if handler is not None:
            handler(node.value)

    def _read(self, node: ast.Attribute, ctx: _Ctx) -> None:
        if not ctx.on_loop and (ctx.facts is None or ctx.facts.blocking is not None):
            return
        ref = self.tracker.resolve(node)
        if ref is None:
            return
        if ref.kind == "instance" and ref.name.endswith(GETTER):  # self.p, p a getter here
            callee = ref.name[:-len(GETTER)]
        elif ref.kind == "method" and ref.type is not None and ref.type not in self.catalog.objects:
            callee = ref.name  # x.p on a type known project-wide: maybe a getter
        else:
            return
        if ctx.on_loop:
            if self._sites:
                self.result.sites.append(self._site(callee + READ, node, ctx))
        elif ctx.facts is not None:
            ctx.facts.edges.append(Edge(callee + READ, tuple(ctx.guard)))

    def _loop_callback(self, node: ast.Call, ctx: _Ctx) -> None:
        """``loop.call_soon(cb)``, ``loop.add_reader(fd, cb)``: the loop calls ``cb`` on the
        loop, so it is a call made on the loop, here (``[loop-callbacks]``)."""
        arg = self._callable_arg(
            node, self.catalog.loop_callbacks.get(node.func.attr))  # type: ignore[attr-defined]
        if arg is None:
            return
        if isinstance(arg, ast.Lambda):
            self._loop_lambdas.add(id(arg))
            return
        ref = self.tracker.resolve(arg)
        if ref is None or self.catalog.is_non_blocking(ref.name):
            return
        where = _Ctx(ctx.qualname, f"{ctx.display} {LOOP_CALLBACK}",
                     on_loop=True)
        hit = declared.configured(ref, self.catalog) or catalogued.classify(ref, self.catalog)
        if hit is not None:
            code, display, extra = hit
            self._report(code, arg, where, display, extra, confidence=(
                "medium" if ref.name in self.catalog.first_use else "high"))
        elif ref.kind in ("def", "class", "import", "method") and self._sites:
            self.result.sites.append(CallSite(
                ref.name, self.result.path, arg.lineno, arg.col_offset + 1, where.display,
                ctx.qualname, self.line(arg.lineno).strip(), self._noqa(arg)))

    def visit_Call(self, node: ast.Call) -> None:
        self._called.add(id(node.func))
        ref = self.tracker.resolve(node.func)
        if self._generators and not (ref is not None and ref.name in _CONSUMERS or (
                type(node.func) is ast.Attribute and node.func.attr == "join")):
            self._handed_on.update(id(a) for a in node.args if type(a) is ast.Call)
        self._mark_offloaded(node, ref)
        if node.args:  # chains ask whether a call is scheduled, and so does _classify
            self._schedule(node, ref)
        ctx = self._ctx[-1] if self._ctx else None
        if ctx is not None and isinstance(node.func, ast.Attribute) and node.args:
            self._loop_callback(node, ctx)
        if ctx is not None:
            catalogued.note_methods(node, self.catalog, ctx.seen)
        if ctx is not None and ctx.on_loop and self._tls_text:
            self._default_tls(node, ref, ctx)
        if (ctx is not None and ctx.signature is not None and type(node.func) is ast.Name
                and id(node) not in self._scheduled):
            self._param_call(node, node.func.id, ctx)
        elif (ctx is not None and ctx.signature is not None and self._classes
              and type(node.func) is ast.Attribute and type(node.func.value) is ast.Name
              and id(node) not in self._scheduled):
            self._field_call(node, node.func, ctx)
        if self._sites and (node.args or node.keywords):
            # off the loop too: the coroutine it makes runs there; at module level, a
            # registry of callables built at import (``TOOLS = [Tool(search)]``)
            self._hands(node, ref, ctx or self._module_ctx())
        if ctx is not None and ref is not None and not self.catalog.is_non_blocking(ref.name):
            self._classify(node, ref, ctx)
            if ref.name == "builtins.len" and len(node.args) == 1:
                self._implicit(node.args[0], "__len__", [], ctx)
        elif (ctx is not None and ref is None and isinstance(node.func, ast.Attribute)
              and (guess := self._distinctive(node.func.attr)) is not None):
            self._classify(node, guess, ctx, guessed=True)  # x of unknown type
        elif (ctx is not None and ctx.on_loop and self._urllib3 and id(node) not in self._awaited
              and (display := catalogued.likely_http(node, ref)) is not None):
            self._report(catalogued.HTTP, node, ctx, display, catalogued.NO_FIELDS,
                         confidence="low")  # a receiver of unknown type
        self.generic_visit(node)

    def _site(self, callee: str, node: ast.expr, ctx: _Ctx, args: Args | None = None,
              quiet: frozenset[str] = frozenset(), low: bool = False,
              awaited: bool = False) -> CallSite:
        """A call made at ``node`` in ``ctx``'s function, for the run to classify."""
        return CallSite(callee, self.result.path, node.lineno, node.col_offset + 1,
                        ctx.display, ctx.qualname, self.line(node.lineno).strip(),
                        self._noqa(node), args, quiet, low, awaited)

    def _param_call(self, node: ast.Call, name: str, ctx: _Ctx) -> None:
        """``return operation()`` in an async def, ``operation`` a parameter it never
        rebinds, the result not awaited: the sync function a caller hands in runs on the
        loop here (``ParamCall``; an awaited one is a coroutine function)."""
        assert ctx.signature is not None
        params, names = ctx.signature
        if (name not in params and name not in names) or ctx.stored(name):
            return
        site = self._site("", node, ctx, self._args(node, None, ctx))
        self.result.param_calls.append(ParamCall(ctx.qualname, name, params, names, site))

    def _module_ctx(self) -> _Ctx:
        if self._top_ctx is None:
            self._top_ctx = _Ctx(self.result.module, "<module>", on_loop=False)
        return self._top_ctx

    def _field_call(self, node: ast.Call, func: ast.Attribute, ctx: _Ctx) -> None:
        """``self.func(...)`` in an async method, ``self.func`` assigned only in
        ``__init__``, from its parameter: the def a constructor call hands in there
        (``Tool(func=search)``) runs on the loop here, as for a parameter (``ParamCall``
        of ``__init__``)."""
        assert ctx.node is not None and isinstance(func.value, ast.Name)
        first = [*ctx.node.args.posonlyargs, *ctx.node.args.args][:1]
        if (not first or func.value.id != first[0].arg
                or len(self.tracker.stack) < 2 or self.tracker.stack[-2].kind != "class"
                or set(self._classes[-1].get(func.attr, ())) != {"__init__"}):
            return
        constructor = f"{ctx.qualname.rpartition('.')[0]}.__init__"
        init = self.result.funcs.get(constructor)
        value = init.inits.get(f"self.{func.attr}") if init is not None else None
        if init is None or value is None or value[0] != "p":
            return
        site = self._site("", node, ctx, self._args(node, None, ctx))
        self.result.param_calls.append(ParamCall(constructor, str(value[1]), init.params,
                                                 init.names, site))

    def _hands(self, node: ast.Call, ref: Ref | None, ctx: _Ctx) -> None:
        """A call that hands a sync def of the tree to a function of the tree (``await
        retry(save)``, ``loop.create_task(every(5, check))`` in sync code too: the coroutine
        runs on the loop): kept for the run, which knows whether the callee is an async def
        that calls that parameter (``ParamCall``)."""
        names = [a for a in [*node.args, *(k.value for k in node.keywords)]
                 if type(a) in (ast.Name, ast.Attribute)]
        if not names:
            return  # only a name can name a def
        if not ctx.on_loop and not any((r := self.tracker.resolve(a)) is not None
                                       and r.kind in ("def", "import") for a in names):
            return  # off the loop, a def named outright (reading every call's values is dear)
        if ref is not None and ref.kind in ("def", "method", "import"):
            callee = ref.name
        elif ref is not None and ref.kind == "class":
            callee = f"{ref.name}.__init__"  # Tool(func=search): what __init__ stores
        elif (type(node.func) is ast.Attribute
              and (base := self.tracker.resolve(node.func.value)) is not None
              and base.kind == "self"):
            callee = f"{base.name}.{node.func.attr}"  # self.m(): an async method
        else:
            return
        args = self._args(node, None, ctx)
        if next(handed.defs_named(args), None) is not None:
            self.result.hands.append(self._site(callee, node, ctx, args))

    def _default_tls(self, node: ast.Call, ref: Ref | None, ctx: _Ctx) -> None:
        """``await asyncio.open_connection(h, p, ssl=True)``, ``websockets.connect("wss://...")``,
        ``loop.create_connection(..., ssl=True)``: a new default SSL context per connection."""
        spots = self.catalog.default_tls.get(ref.name) if ref is not None else None
        shown, confidence = (ref.name if ref is not None else ""), "high"
        if spots is None and isinstance(node.func, ast.Attribute) and (
                ref is None or ref.kind == "method"):
            spots = self.catalog.default_tls_methods.get(node.func.attr)
            shown, confidence = f"{ast.unparse(node.func.value)}.{node.func.attr}", "medium"
        if spots is not None and catalogued.default_tls(node, spots):
            self._report("COB100", node, ctx, f"{shown}() (a new default SSL context)",
                         catalogued.NO_FIELDS, confidence=confidence)

    def _distinctive(self, method: str | None) -> Ref | None:
        """``T.method`` when only the catalogued type ``T`` has a method of that name
        (``load_cert_chain``): what a receiver of unknown type calls is T's."""
        name = self.catalog.distinctive.get(method or "")
        return None if name is None else Ref(name, "method", type=name.rpartition(".")[0],
                                            attr=method)

    def _classify(self, node: ast.Call, ref: Ref, ctx: _Ctx, guessed: bool = False) -> None:
        ref = catalogued.base_constructor(ref, self.catalog)
        hit = declared.configured(ref, self.catalog) or catalogued.classify(ref, self.catalog)
        if (hit is None and ref.kind == "method" and ref.type not in self.catalog.objects
                and (guess := self._distinctive(ref.attr)) is not None):
            # on a receiver typed only project-wide (a dependency's factory's result)
            ref, guessed = guess, True
            hit = catalogued.classify(ref, self.catalog)
        if (hit is not None and id(node) in self._awaited
                and ref.name not in self.catalog.awaited_blocking):
            return  # ``await open(p)``: a sync call's result is no awaitable, so the name is
            # bound at run time to an async namesake the lint cannot see (docs/lint.md)
        if (hit is not None and not guessed and ref.kind == "method"
                and (id(node) in self._scheduled
                     or ctx.awaits_methods_of(node, self._source_lines))):
            return  # ``conn: redis.Redis`` but ``await conn.set(k)`` beside, or the call
            # handed to ``gather``: the same reasoning, for a typed receiver (an async client
            # under a sync annotation; an untyped one may well mix sync and async methods)
        if hit is not None and id(node) in self._pipe_wraps and ref.name in _PIPE_WRAPS:
            return  # a descriptor wrapped for a pipe transport (transport_wraps)
        if (hit is not None and ref.kind == "method" and id(node) in self._stored
                and f"{ref.type}.{ref.attr}" in self.catalog.generators):
            return  # the generator reads the directory when iterated, not here
        if hit is not None and catalogued.returns_at_once(
                node, ref, self.catalog, self.tracker, ctx.seen,
                [a for a in ctx.guard if a.param in ctx.stable_params()],
                lambda: self._fds(ctx)):
            return
        flushing = self._flush_state(node, ref, ctx) if hit is not None else None
        if flushing == QUIET:
            return
        if hit is not None:
            code, display, extra = hit
            if ctx.on_loop:
                self._report(code, node, ctx, display, extra,
                             catalogued.deferred_buffers(node, ref, self.catalog, self.tracker),
                             "low" if ctx.fallback else
                             "medium" if guessed or ref.name in self.catalog.first_use
                             or catalogued.generated_stub(ref, self.catalog)
                             or ctx.once or flushing == UNSURE
                             or catalogued.checked_first(node, ref, self.catalog, ctx.seen)
                             or self._on_pipe(node, ref, ctx) else "high")
            elif ctx.facts is not None and ctx.facts.blocking is None:
                unless = catalogued.deferred_buffers(node, ref, self.catalog, self.tracker)
                if unless:
                    ctx.facts.unless[len(ctx.facts.blocks)] = unless
                if ref.name in self.catalog.first_use or ctx.once:  # a chain to it is low
                    display += (FIRST_CALL if ref.name in self.catalog.per_process
                                and not ctx.once else FIRST_USE)
                elif ctx.fallback:
                    display += FALLBACK
                ctx.facts.blocks.append((display, tuple(ctx.guard)))
            return
        if ref.kind not in ("def", "class", "import", "method"):
            return
        handed = False
        if ref.kind == "def" and ref.name in self._generators:
            if id(node) in self._stored or id(node) in self._unconsumed:
                return  # ``g = plan()``: a generator made, none of its body run
            handed = id(node) in self._handed_on  # ``RE(plan())``: where it runs is a guess
        deferred = (ref.kind == "method" and ref.type is not None
                    and ref.type not in self.catalog.objects)
        quiet = (catalogued.quiet_hints(node, self.catalog, self.tracker, ctx.seen)
                 if deferred else catalogued.constructor_hints(node, self.catalog)
                 if ref.kind == "class" else frozenset())
        if ctx.on_loop:
            if not self._sites and not deferred:
                return
            self.result.sites.append(self._site(
                ref.name, node, ctx, self._args(node, None, ctx), quiet,
                low=bool(ctx.once or ctx.fallback or handed),
                awaited=id(node) in self._scheduled))
        elif ctx.facts is not None and ctx.facts.blocking is None:
            ctx.facts.edges.append(Edge(ref.name, tuple(ctx.guard), self._args(node, ctx),
                                        quiet, once=bool(ctx.once or ctx.fallback or handed)))

    def finish(self) -> FileResult:
        for qualname in self._dups:
            del self.result.funcs[qualname]
        self.result.written = frozenset(self._written)
        return self.result


THREAD = "threading.Thread"


def scan_source(path: str, module: str, source: bytes, catalog: Catalog, *,
                is_package: bool = False, noqa: NoqaPolicy = DEFAULT_NOQA) -> FileResult:
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
                          noqa=noqa)
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
        scanner._dispatch = {}  # the bound handlers' cycle: freed now, not by a gc pass
    return scanner.finish()
