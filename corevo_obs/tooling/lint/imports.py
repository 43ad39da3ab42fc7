"""The shared name tracker: which qualified name, or which object type, an expression means.

Rules never look at raw identifiers. ``import requests as r`` / ``from time import sleep``
are resolved here once, scope by scope (module, class, function, lambda), with simple
type tracking for objects built by known factories (``conn = sqlite3.connect(...)``,
``self.s3 = boto3.client("s3")``, ``p: Path``). A name bound more than one way is
ambiguous and resolves to nothing: unresolved means unflagged, which keeps precision high.
"""

from __future__ import annotations

import ast
import builtins
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, cast

BUILTINS = frozenset(dir(builtins))
AMBIGUOUS = "?"
NONE_TYPE = "builtins.NoneType"  # an attribute set to None (and maybe later to an object)
# "X[]": a container of X (``Tuple[X, ...]``, ``list[X]``): iterating it gives an X
ELEMENTS = "[]"
# "X|builtins.str": X or a builtin scalar (``str | Path | None``): a method the scalars
# lack can only be X's (the scalars would raise AttributeError)
UNION = "|"
_SCALARS: dict[str, type] = {"builtins.str": str, "builtins.bytes": bytes, "builtins.int": int,
                             "builtins.float": float, "builtins.bool": bool,
                             "os.PathLike": os.PathLike}
_CONTAINERS = frozenset({
    "builtins.list", "builtins.tuple", "builtins.set", "builtins.frozenset",
    *(f"typing.{n}" for n in ("List", "Tuple", "Set", "FrozenSet", "Sequence",
                              "MutableSequence", "Iterable", "Iterator", "Collection",
                              "AbstractSet", "Deque")),
    *(f"collections.abc.{n}" for n in ("Sequence", "MutableSequence", "Iterable", "Iterator",
                                       "Collection", "Set")),
    "collections.deque"})
# annotations that wrap the type they mean (``Annotated[X, ...]``, ``Final[X]``), and the
# modules whose other generics are no instance of their argument (``type[X]``, ``Callable``)
_WRAPPERS = frozenset({"Annotated", "ClassVar", "Final", "Required", "NotRequired", "ReadOnly"})
_TYPING = ("typing.", "typing_extensions.", "collections.", "types.")
# calls that hand back the items of their first argument (``sorted(p.glob("*"))``)
_PASS_ITEMS = frozenset({"builtins.sorted", "builtins.list", "builtins.tuple", "builtins.set",
                         "builtins.reversed", "builtins.frozenset"})
# the deferred name of what reading a property gives: ``pkg.Reader.fh#get`` (``returns.py``
# resolves it like a call's result; a plain attribute never gets one, so stays unknown)
GETTER = "#get"
PROPERTY_DECORATORS = frozenset({"builtins.property", "functools.cached_property"})


def _getter_name(name: str) -> bool:
    """A decorator named like a property descriptor: reading the attribute calls it."""
    last = name.rpartition(".")[2]
    return last.endswith("property") and last != "abstractproperty" or last == "reify"


TYPED_DICTS = frozenset({"typing.TypedDict", "typing_extensions.TypedDict"})


def item_type(accessor: str, key: str) -> str:
    """The deferred type of ``d["key"]`` / ``d.get("key")`` (``accessor``: ``T.__getitem__``
    / ``T.get``): a TypedDict's file records its fields under these names; for any other
    class the run falls back to what the accessor returns (``returns.py``)."""
    return f"{accessor}[{key}]"


class Ref(NamedTuple):
    """What a callee expression resolves to.

    ``kind``: ``import`` / ``def`` / ``class`` (a project or library qualified name),
    ``builtin``, or ``method`` (``name`` is ``Type.method`` on an instance of ``type``).
    A named tuple, not a frozen dataclass: one is made per name the scan resolves, and a
    tuple is built several times faster (same fields, equality and hash).
    """

    name: str
    kind: str
    type: str | None = None
    attr: str | None = None


@dataclass
class Binding:
    kind: str  # import | def | class | var
    target: str | None  # qualified name, or the type of a var (None: unknown)


@dataclass
class ClassInfo:
    qualname: str
    methods: dict[str, str] = field(default_factory=dict)  # name -> qualname (sync only)
    attrs: dict[str, str | None] = field(default_factory=dict)  # self.x -> type
    properties: set[str] = field(default_factory=set)  # methods read as ``self.x``
    bases: tuple[str, ...] = ()  # qualified names of the bases the file can name
    # names the class body binds to anything but a sync method (an ``async def``, a value):
    # they hide a base's method of the same name
    shadows: frozenset[str] = frozenset()


@dataclass
class Scope:
    kind: str  # module | class | function
    qualname: str
    bindings: dict[str, Binding] = field(default_factory=dict)
    self_name: str | None = None
    cls: ClassInfo | None = None
    # a function's annotated names: name -> the types its annotations declare (None: one
    # the lint cannot resolve, e.g. ``int``), and the names a def / class / import binds
    declared: dict[str, set[str | None]] = field(default_factory=dict)
    nonvar: set[str] = field(default_factory=set)
    flow: dict[str, str | None] = field(default_factory=dict)  # re-declared: type at entry
    nones: set[str] = field(default_factory=set)  # module names bound so far only to None

    def bind(self, name: str, binding: Binding) -> None:
        old = self.bindings.get(name)
        if old is None or old == binding or name in self.nones:
            self.bindings[name] = binding
            self.nones.discard(name)
        else:
            self.bindings[name] = Binding("var", AMBIGUOUS)

    def bind_none(self, name: str) -> None:
        """``name = None`` in a module: the fallback of an optional import (``try: import
        ssl`` / ``except ImportError: ssl = None``) or a default set before the real value.
        Where the name is used it is the other binding (a call on None would raise), so
        None never makes it unknown."""
        if name not in self.bindings:
            self.bindings[name] = Binding("var", None)
            self.nones.add(name)


# statements that bind or store no name themselves (only their blocks may): most of a
# body, sent past the binding collector's and the store walk's chains of tests at once
BINDS_NOTHING = frozenset({ast.Return, ast.Pass, ast.Raise, ast.Assert, ast.Break,
                           ast.Continue, ast.If, ast.While})
# and those the collector records nothing for (an expression: see ``_made_nonblocking``)
_NOT_COLLECTED = BINDS_NOTHING | {ast.Delete, ast.Global, ast.Nonlocal, ast.Match}

# expressions whose value has a type ``value_type`` may know (``resolve``)
_VALUE_NODES = frozenset({ast.Call, ast.BinOp, ast.Await, ast.Subscript})

# fields that hold identifiers, numbers or flags, never a node
_NOT_NODES = frozenset({"id", "attr", "name", "arg", "module", "level", "kind", "conversion",
                        "is_async", "type_comment", "simple", "tag", "kwd_attrs"})
_WALK_FIELDS: dict[type, tuple[str, ...]] = {}


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """``ast.walk`` (the same nodes in the same breadth-first order) without its per-node
    ``iter_fields`` / ``iter_child_nodes`` generators: the fields that may hold nodes are
    listed once per node type."""
    todo = deque((node,))
    pop, push = todo.popleft, todo.append
    fields_of = _WALK_FIELDS
    while todo:
        node = pop()
        kind = type(node)
        fields = fields_of.get(kind)
        if fields is None:
            fields = fields_of[kind] = tuple(
                f for f in getattr(kind, "_fields", ()) if f not in _NOT_NODES)
        for name in fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                push(value)
            elif type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        push(item)
        yield node


# the statement blocks of each compound statement, in the order they are visited
_BLOCKS: dict[type, tuple[str, ...]] = {
    ast.If: ("body", "orelse"), ast.For: ("body", "orelse"), ast.AsyncFor: ("body", "orelse"),
    ast.While: ("body", "orelse"), ast.With: ("body",), ast.AsyncWith: ("body",),
    ast.Try: ("body", "orelse", "finalbody"), ast.TryStar: ("body", "orelse", "finalbody"),
    ast.Match: (),
}
_HANDLERS = frozenset({ast.Try, ast.TryStar})


def _compound_children(stmt: ast.stmt) -> Iterator[list[ast.stmt]]:
    """The blocks nested in a statement (not a def's or class's body): a table per type
    instead of probing every statement for each field."""
    kind = type(stmt)
    names = _BLOCKS.get(kind)
    if names is None:
        return
    for name in names:
        yield getattr(stmt, name)
    if kind in _HANDLERS:
        for handler in stmt.handlers:  # type: ignore[attr-defined]
            yield handler.body
    elif kind is ast.Match:
        for case in stmt.cases:  # type: ignore[attr-defined]
            yield case.body


def _own_statements(stmts: list[ast.stmt]) -> Iterator[ast.stmt]:
    """These statements and the ones nested in their blocks, not in nested defs."""
    for stmt in stmts:
        yield stmt
        for block in _compound_children(stmt):
            yield from _own_statements(block)


def is_none(node: ast.expr | None) -> bool:
    """The constant ``None``."""
    return isinstance(node, ast.Constant) and node.value is None


def _or_type(node: ast.BoolOp, type_of: Callable[[ast.expr], str | None]) -> str | None:
    """``given or make()``: the one type of its sides (None aside), else None."""
    types = {type_of(v) for v in node.values if not is_none(v)}
    return types.pop() if len(types) == 1 else None


def _made_nonblocking(stmt: ast.stmt) -> ast.expr | None:
    """The object of ``x.setblocking(False)`` / ``x.settimeout(0)``: its calls cannot block."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    call = stmt.value
    if (isinstance(call.func, ast.Attribute) and call.func.attr in ("setblocking", "settimeout")
            and len(call.args) == 1 and isinstance(call.args[0], ast.Constant)
            and call.args[0].value in (False, 0)):
        return call.func.value
    return None


def _params_with_defaults(
    args: ast.arguments,
) -> Iterator[tuple[ast.arg, ast.expr | None]]:
    """Every parameter with its default (positional-only, plain, ``*a``, keyword-only, ``**k``)."""
    positional = [*args.posonlyargs, *args.args]
    pad: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    yield from zip(positional, [*pad, *args.defaults], strict=True)
    if args.vararg is not None:
        yield args.vararg, None
    yield from zip(args.kwonlyargs, args.kw_defaults, strict=True)
    if args.kwarg is not None:
        yield args.kwarg, None


def _mode_spreads(node: ast.FunctionDef | ast.AsyncFunctionDef,
                  keywords: frozenset[str]) -> frozenset[str]:
    """Names of mappings this function sets a mode keyword in (``kwargs["async_"] = True``):
    spread into a factory call (``connect(dsn, **kwargs)``) they give that keyword."""
    out: set[str] = set()
    for n in walk(node):
        if (isinstance(n, ast.Assign) and len(n.targets) == 1
                and isinstance(t := n.targets[0], ast.Subscript) and isinstance(t.value, ast.Name)
                and isinstance(t.slice, ast.Constant) and t.slice.value in keywords
                and not (isinstance(n.value, ast.Constant) and not n.value.value)):
            out.add(t.value.id)
    return frozenset(out)


def argument(call: ast.Call, where: tuple[int | str, ...]) -> ast.expr | None:
    """The first of these positions / keywords the call gives."""
    for spot in where:
        if isinstance(spot, int):
            if len(call.args) > spot:
                return call.args[spot]
        else:
            found = next((k.value for k in call.keywords if k.arg == spot), None)
            if found is not None:
                return found
    return None


def _mode_given(call: ast.Call, keywords: frozenset[str], spreads: frozenset[str]) -> bool:
    """A keyword of a non-blocking mode given anything but a false constant, directly or in
    a mapping spread with ``**`` that the function set it in (``spreads``)."""
    for k in call.keywords:
        if k.arg is None:
            if isinstance(k.value, ast.Name) and k.value.id in spreads:
                return True
        elif k.arg in keywords and not (isinstance(k.value, ast.Constant)
                                        and not k.value.value):
            return True
    return False


class ImportTracker:
    """A stack of scopes with their bindings, known before the body is visited.

    ``module`` is the dotted module name of the file (``pkg.sub.mod``), ``is_package``
    whether it is an ``__init__`` (for relative imports).
    """

    def __init__(self, module: str, *, is_package: bool, factories: dict[str, str],
                 offloads: dict[str, int] | None = None,
                 aliases: dict[str, str] | None = None,
                 objects: Iterable[str] = (), attributes: dict[str, str] | None = None,
                 elements: dict[str, str] | None = None,
                 modes: dict[str, frozenset[str]] | None = None,
                 memory: tuple[dict[str, tuple[int | str, ...]], frozenset[str]] = ({}, frozenset())
                 ) -> None:
        self.module = module
        self.objects = frozenset(objects)  # catalog types: their methods' results are not
        # deferred (``value_type``), the catalog's factories say what they return
        self.package = module if is_package else module.rpartition(".")[0]
        self.factories = factories
        self.offloads = offloads or {}
        self.aliases = aliases or {}  # annotation type -> tracked type (io.TextIOWrapper)
        self.attributes = attributes or {}  # "pathlib.Path.parent" -> the attribute's type
        self.elements = elements or {}  # "pathlib.Path.glob" -> the type of its items
        self.modes = modes or {}  # factory -> keywords of its non-blocking mode
        # factory -> its file argument, and the names that name no file (":memory:")
        self.memory_args, self.memory_names = memory
        # mappings the current function set a mode keyword in (spread by ``**``), and
        # whether the module spells a mode keyword at all (else nothing is looked for)
        self.mode_spreads: frozenset[str] = frozenset()
        self.mode_keywords = frozenset().union(*self.modes.values())
        self.mode_text = True
        self.stack: list[Scope] = []
        self.classes: dict[str, ClassInfo] = {}
        self.returns: dict[str, ast.expr] = {}  # function qualname -> return annotation

    # -- scopes ----------------------------------------------------------------------
    def push_module(self, body: list[ast.stmt]) -> None:
        scope = Scope("module", self.module)
        self.stack.append(scope)
        self._collect(body, scope)

    def push_function(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda, qualname: str
    ) -> Scope:
        parent = self.stack[-1]
        scope = Scope("function", qualname)
        args = node.args
        params = [*args.posonlyargs, *args.args]
        if parent.cls is not None and params and not isinstance(node, ast.Lambda):
            if not any(isinstance(d, ast.Name) and d.id == "staticmethod"
                       for d in node.decorator_list):
                scope.self_name = params[0].arg
        entry: dict[str, str | None] = {}  # annotated parameters: their declared types
        for a, default in _params_with_defaults(args):
            typ = self._annotation_type(a.annotation)
            if a.annotation is not None:
                scope.declared[a.arg] = {typ}
                entry[a.arg] = typ
            if typ is None and a.annotation is None and default is not None:
                typ = self.value_type(default)  # evaluated at def time, in the parent scope
            scope.bindings[a.arg] = Binding("var", typ)
        if scope.self_name is not None and parent.cls is not None:
            scope.bindings[scope.self_name] = Binding("self", parent.cls.qualname)
            scope.declared.pop(scope.self_name, None)
        self.stack.append(scope)
        if isinstance(node, ast.Lambda):
            return scope
        self._collect(node.body, scope)
        self._declare(scope, entry)
        return scope

    def _declare(self, scope: Scope, entry: dict[str, str | None]) -> None:
        """A variable's annotation is its type, as a type checker reads it (PEP 526): a
        plain ``x = f()`` later does not change what ``x`` is. One resolved declared type
        holds in the whole function; a name declared with several (``f: int = 7`` then
        ``f: TextIOWrapper = ...``) is typed statement by statement (:meth:`flow_types`)."""
        for name, types in scope.declared.items():
            if name in scope.nonvar or name == scope.self_name:
                continue
            resolved = types - {None, AMBIGUOUS}
            if not resolved:
                continue
            if len(types) == 1:
                scope.bindings[name] = Binding("var", next(iter(resolved)))
            else:
                scope.flow[name] = entry.get(name, AMBIGUOUS)

    def push_class(self, node: ast.ClassDef, qualname: str) -> Scope:
        info = ClassInfo(qualname, bases=self.class_bases(node))
        self.classes[qualname] = info
        scope = Scope("class", qualname, cls=info)
        self.stack.append(scope)
        self._collect(node.body, scope)
        for stmt in node.body:
            if isinstance(stmt, ast.FunctionDef):
                info.methods.setdefault(stmt.name, f"{qualname}.{stmt.name}")
                if self.is_property(stmt):
                    info.properties.add(stmt.name)
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.args.args:
                params = {a.arg: self._annotation_type(a.annotation)
                          for a, _ in _params_with_defaults(stmt.args)}
                spreads = self.enter_modes(stmt)
                self._collect_self_attrs(stmt.body, stmt.args.args[0].arg, info, params)
                self.mode_spreads = spreads
        for name, b in scope.bindings.items():  # `client: httpx.Client` in the class body
            if b.kind == "var" and name not in info.attrs and name not in info.methods:
                info.attrs[name] = b.target
        for name, b in scope.bindings.items():
            if b.kind != "def" and name in info.methods:
                del info.methods[name]  # redefined: ambiguous
        info.shadows = frozenset(scope.bindings) - set(info.methods)
        return scope

    def pop(self) -> Scope:
        return self.stack.pop()

    def class_bases(self, node: ast.ClassDef) -> tuple[str, ...]:
        """The bases a method may be inherited from: classes of the tree or imported names
        (a generic base ``Base[T]`` by its origin); ``object`` and builtins add nothing."""
        out: list[str] = []
        for expr in node.bases:
            if isinstance(expr, ast.Subscript):
                expr = expr.value
            ref = self.resolve(expr)
            if ref is not None and ref.kind in ("class", "import") and ref.name:
                out.append(ref.name)
        return tuple(out)

    def ancestors(self, bases: tuple[str, ...]) -> tuple[frozenset[str], bool]:
        """Every base reachable from ``bases`` through this file's classes, and whether
        one of them is defined elsewhere (its own bases unknown here)."""
        todo, seen, elsewhere = list(bases), set(), False
        while todo:
            base = todo.pop()
            if base in seen:
                continue
            seen.add(base)
            local = self.classes.get(base)
            if local is not None:
                todo.extend(local.bases)
            else:
                elsewhere = True
        return frozenset(seen), elsewhere

    def is_typed_dict(self, info: ClassInfo) -> bool:
        """A ``TypedDict`` class (directly, or through a TypedDict class of this file): its
        annotated fields are the types of ``d["field"]``."""
        return not self.ancestors(info.bases)[0].isdisjoint(TYPED_DICTS)

    def is_property(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """A getter: ``@property``, ``@functools.cached_property``, or a descriptor named
        like one (``propcache``'s ``under_cached_property``, werkzeug's and django's
        ``cached_property``, aiohttp's and pyramid's ``reify``)."""
        for deco in node.decorator_list:
            ref = self.resolve(deco)
            if ref is not None and (ref.name in PROPERTY_DECORATORS or _getter_name(ref.name)):
                return True
        return False

    # -- binding collection (statements only: cheap, no expression walk) ---------------
    def _collect(self, body: Iterable[ast.stmt], scope: Scope) -> None:
        for stmt in body:
            kind = type(stmt)
            if kind in _NOT_COLLECTED:
                pass
            elif kind is ast.Expr:
                if (quiet := _made_nonblocking(stmt)) is not None:
                    self._bind_target(quiet, scope, AMBIGUOUS)
            elif isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                qualname = (f"{scope.qualname}.{stmt.name}" if scope.kind != "function"
                            else f"{scope.qualname}.<locals>.{stmt.name}")
                scope.bind(stmt.name, Binding("def", qualname))
                scope.nonvar.add(stmt.name)
                if stmt.returns is not None:
                    self.returns[qualname] = stmt.returns
            elif isinstance(stmt, ast.ClassDef):
                scope.bind(stmt.name, Binding("class", f"{scope.qualname}.{stmt.name}"))
                scope.nonvar.add(stmt.name)
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname:
                        scope.bind(alias.asname, Binding("import", alias.name))
                        scope.nonvar.add(alias.asname)
                    else:
                        top = alias.name.partition(".")[0]
                        scope.bind(top, Binding("import", top))
                        scope.nonvar.add(top)
            elif isinstance(stmt, ast.ImportFrom):
                base = self._from_base(stmt)
                for alias in stmt.names:
                    if alias.name != "*":
                        qualname = f"{base}.{alias.name}" if base else alias.name
                        scope.bind(alias.asname or alias.name, Binding("import", qualname))
                        scope.nonvar.add(alias.asname or alias.name)
            elif (isinstance(stmt, ast.Assign) and scope.kind != "class"
                  and isinstance(stmt.value, ast.Constant) and stmt.value.value is None
                  and all(isinstance(lhs, ast.Name) for lhs in stmt.targets)):
                for lhs in stmt.targets:
                    scope.bind_none(cast(ast.Name, lhs).id)
            elif isinstance(stmt, ast.Assign):
                typ = self.value_type(stmt.value)
                for lhs in stmt.targets:
                    self._bind_target(lhs, scope, typ)
            elif isinstance(stmt, ast.AnnAssign):
                typ = self._annotation_type(stmt.annotation)
                if scope.kind == "function" and isinstance(stmt.target, ast.Name):
                    scope.declared.setdefault(stmt.target.id, set()).add(typ)
                if typ is None and stmt.value is not None:
                    typ = self.value_type(stmt.value)
                self._bind_target(stmt.target, scope, typ)
            elif isinstance(stmt, ast.AugAssign):
                self._bind_target(stmt.target, scope, AMBIGUOUS)
            elif isinstance(stmt, ast.For | ast.AsyncFor):
                self._bind_target(stmt.target, scope, self.element_type(stmt.iter))
            elif isinstance(stmt, ast.With | ast.AsyncWith):
                for item in stmt.items:
                    if item.optional_vars is not None:
                        typ = self.value_type(item.context_expr)
                        self._bind_target(item.optional_vars, scope, typ)
            elif isinstance(stmt, ast.Try | ast.TryStar):
                for handler in stmt.handlers:
                    if handler.name:
                        scope.bind(handler.name, Binding("var", None))
            if kind in _BLOCKS:
                for block in _compound_children(stmt):
                    self._collect(block, scope)

    def flow_types(self, body: list[ast.stmt],
                   scope: Scope) -> dict[int, dict[str, str | None]]:
        """For each statement of a function body (nested blocks included, nested defs
        not), the type each re-declared name (``scope.flow``) has when it starts: the last
        annotation on every path there; paths that disagree, or a loop that re-declares
        it, make it unknown."""
        records: dict[int, dict[str, str | None]] = {}
        names = scope.flow

        def declared_in(stmts: list[ast.stmt]) -> dict[str, set[str | None]]:
            out: dict[str, set[str | None]] = {}
            for n in _own_statements(stmts):
                if (isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
                        and n.target.id in names):
                    out.setdefault(n.target.id, set()).add(self._annotation_type(n.annotation))
            return out

        def merge(*envs: dict[str, str | None]) -> dict[str, str | None]:
            out = dict(envs[0])
            for env in envs[1:]:
                for k, v in env.items():
                    if out.get(k) != v:
                        out[k] = AMBIGUOUS
            return out

        def run(stmts: list[ast.stmt], env: dict[str, str | None]) -> dict[str, str | None]:
            for st in stmts:
                records[id(st)] = env
                if isinstance(st, ast.AnnAssign):
                    if isinstance(st.target, ast.Name) and st.target.id in names:
                        env = {**env, st.target.id: self._annotation_type(st.annotation)}
                elif isinstance(st, ast.For | ast.AsyncFor | ast.While):
                    inside = declared_in([*st.body, *st.orelse])
                    env = {**env, **{k: AMBIGUOUS for k, ts in inside.items()
                                     if ts != {env.get(k)}}}
                    env = merge(env, run(st.body, env), run(st.orelse, env))
                elif isinstance(st, ast.With | ast.AsyncWith):
                    env = run(st.body, env)
                elif isinstance(st, ast.If):
                    env = merge(run(st.body, env), run(st.orelse, env))
                elif isinstance(st, ast.Try | ast.TryStar):
                    body = run(st.body, env)
                    # a handler may start anywhere in the body: what it re-declares is unknown
                    raised = {**env, **{k: AMBIGUOUS for k, ts in declared_in(st.body).items()
                                        if ts != {env.get(k)}}}
                    ends = [run(st.orelse, body), *(run(h.body, raised) for h in st.handlers)]
                    env = run(st.finalbody, merge(raised, *ends))
                elif isinstance(st, ast.Match):
                    env = merge(env, *(run(c.body, env) for c in st.cases))
            return env

        run(body, {k: v for k, v in names.items()})
        return records

    def _collect_self_attrs(self, body: Iterable[ast.stmt], self_name: str,
                            info: ClassInfo, params: dict[str, str | None]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Assign | ast.AnnAssign):
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                typ = None
                if isinstance(stmt, ast.AnnAssign):
                    typ = self._annotation_type(stmt.annotation)
                if typ is None and isinstance(stmt.value, ast.Name) and stmt.value.id in params:
                    typ = params[stmt.value.id]  # self.client = client (an annotated param)
                elif (typ is None and isinstance(stmt.value, ast.BoolOp)
                      and isinstance(stmt.value.op, ast.Or)):  # client or make_client()
                    typ = _or_type(stmt.value, lambda v: params[v.id] if isinstance(
                        v, ast.Name) and v.id in params else self.value_type(v))
                elif typ is None and is_none(stmt.value):
                    typ = NONE_TYPE
                elif typ is None and stmt.value is not None:
                    typ = self.value_type(stmt.value)
                for t in targets:
                    if (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                            and t.value.id == self_name):
                        # ``self.conn = None`` beside ``self.conn = connect()``: a method
                        # called on it runs on the connection (None has none)
                        old = info.attrs.get(t.attr, typ)
                        info.attrs[t.attr] = (typ if old in (typ, NONE_TYPE) else
                                              old if typ == NONE_TYPE else AMBIGUOUS)
            quiet = _made_nonblocking(stmt)
            if (isinstance(quiet, ast.Attribute) and isinstance(quiet.value, ast.Name)
                    and quiet.value.id == self_name):
                info.attrs[quiet.attr] = AMBIGUOUS
            for block in _compound_children(stmt):
                self._collect_self_attrs(block, self_name, info, params)

    def _bind_target(self, target: ast.expr, scope: Scope, typ: str | None) -> None:
        if isinstance(target, ast.Name):
            scope.bind(target.id, Binding("var", typ))
        elif isinstance(target, ast.Tuple | ast.List):
            for elt in target.elts:
                self._bind_target(elt, scope, None)
        elif isinstance(target, ast.Starred):
            self._bind_target(target.value, scope, None)

    def _from_base(self, stmt: ast.ImportFrom) -> str:
        if not stmt.level:
            return stmt.module or ""
        parts = self.package.split(".") if self.package else []
        if stmt.level > 1:
            parts = parts[: len(parts) - (stmt.level - 1)]
        if stmt.module:
            parts.append(stmt.module)
        return ".".join(parts)

    # -- resolution -----------------------------------------------------------------
    def lookup(self, name: str) -> Binding | None:
        """The innermost binding of ``name``; a class body's names are seen only from the
        class body itself (not from its methods), as Python scopes them."""
        stack = self.stack
        b = stack[-1].bindings.get(name)
        if b is not None:
            return b
        for i in range(len(stack) - 2, -1, -1):
            scope = stack[i]
            if scope.kind != "class":
                b = scope.bindings.get(name)
                if b is not None:
                    return b
        return None

    def narrow(self, name: str, typ: str) -> Binding | None:
        """Give ``name`` the type ``typ`` in the innermost scope (``isinstance`` narrowing);
        returns the binding it replaced, for :meth:`widen`."""
        scope = self.stack[-1]
        old = scope.bindings.get(name)
        scope.bindings[name] = Binding("var", typ)
        return old

    def widen(self, name: str, old: Binding | None) -> None:
        """Undo :meth:`narrow`."""
        if old is None:
            self.stack[-1].bindings.pop(name, None)
        else:
            self.stack[-1].bindings[name] = old

    def annotation_type(self, ann: ast.expr | None) -> str | None:
        return self._annotation_type(ann)

    def _annotation_type(self, ann: ast.expr | None) -> str | None:
        """The type an annotation names: ``X``, ``"X"``, ``Optional[X]``, ``X | None``,
        ``None | X``, ``Union[X, None]`` (a union of two real types is no one type)."""
        stripped = self._strip_optional(ann)
        if stripped is None:
            return self._union_type(ann)
        ann = stripped
        if isinstance(ann, ast.Subscript):
            return self._container_type(ann)
        ref = self.resolve(ann)
        if ref is None or ref.kind not in ("import", "class"):
            return None
        name = self.aliases.get(ref.name, ref.name)
        return self.factories.get(name, name)

    def _strip_optional(self, ann: ast.expr | None, depth: int = 0) -> ast.expr | None:
        if ann is None or depth > 4:
            return None
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            try:
                ann = ast.parse(ann.value.strip(), mode="eval").body
            except SyntaxError:
                return None
            return self._strip_optional(ann, depth + 1)
        members: list[ast.expr] | None = None
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
            members = [ann.left, ann.right]
        elif isinstance(ann, ast.Subscript):
            ref = self.resolve(ann.value)
            generic = ref.name if ref is not None else ""
            if (ref is None and isinstance(ann.value, ast.Name)
                    and ann.value.id in ("Optional", "Union")
                    and self.lookup(ann.value.id) is None):
                # an annotation is often never evaluated (a string, PEP 563 / 649): an
                # unbound ``Optional`` there can only mean typing's
                generic = f"typing.{ann.value.id}"
            if generic in ("typing.Optional", "typing_extensions.Optional"):
                return self._strip_optional(ann.slice, depth + 1)
            if generic in ("typing.Union", "typing_extensions.Union"):
                members = (list(ann.slice.elts) if isinstance(ann.slice, ast.Tuple)
                           else [ann.slice])
            elif generic in _CONTAINERS:
                return ann  # its items' type: _container_type
            elif generic.rpartition(".")[2] in _WRAPPERS and generic.startswith(_TYPING):
                first = ann.slice.elts[0] if isinstance(ann.slice, ast.Tuple) else ann.slice
                return self._strip_optional(first, depth + 1)
            elif ref is not None and ref.kind in ("import", "class") and not (
                    generic.startswith(_TYPING) or generic.startswith("builtins.")):
                return ann.value  # a generic class's instance: ``Popen[bytes]`` is a Popen
            else:
                return None
        if members is None:
            return ann
        real = [m for m in members
                if not (isinstance(m, ast.Constant) and m.value is None)]
        return self._strip_optional(real[0], depth + 1) if len(real) == 1 else None

    def _members(self, ann: ast.expr, depth: int = 0) -> list[ast.expr] | None:
        """The members of a union annotation (``A | B | None``, ``Union[A, B]``,
        ``Optional[A | B]``), flattened; None for anything else."""
        if depth > 4:
            return None
        if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
            try:
                return self._members(ast.parse(ann.value.strip(), mode="eval").body, depth + 1)
            except SyntaxError:
                return None
        if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
            parts = [ann.left, ann.right]
        elif isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name | ast.Attribute):
            ref = self.resolve(ann.value)
            name = ref.name if ref is not None else f"typing.{ast.unparse(ann.value)}"
            if name.rpartition(".")[2] not in ("Union", "Optional"):
                return None
            parts = list(ann.slice.elts) if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        else:
            return [ann]
        out: list[ast.expr] = []
        for part in parts:
            inner = self._members(part, depth + 1)
            if inner is None:
                return None
            out.extend(inner)
        return out

    def _union_type(self, ann: ast.expr | None) -> str | None:
        """``str | Path | None``: one real type beside builtin scalars and None (UNION)."""
        members = self._members(ann) if ann is not None else None
        if not members or len(members) > 8:
            return None
        real: list[str] = []
        scalars: list[str] = []
        for m in members:
            if isinstance(m, ast.Constant) and m.value is None:
                continue
            ref = self.resolve(m)
            name = ref.name if ref is not None else ""
            if name in _SCALARS:
                scalars.append(name)
                continue
            typ = self._annotation_type(m) if not isinstance(m, ast.BinOp) else None
            if typ is None or UNION in typ:
                return None
            real.append(typ)
        if len(set(real)) != 1:
            return None
        return UNION.join([real[0], *sorted(set(scalars))]) if scalars else real[0]

    def _container_type(self, ann: ast.Subscript) -> str | None:
        """``Tuple[X, ...]``, ``tuple[X, X]``, ``list[X]``, ``Sequence[X]``: "X[]"."""
        items = list(ann.slice.elts) if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        if len(items) == 2 and isinstance(items[1], ast.Constant) and items[1].value is ...:
            items = items[:1]
        if not items or len({ast.unparse(i) for i in items}) != 1:
            return None
        inner = self._annotation_type(items[0])
        if inner is None or inner == AMBIGUOUS or UNION in inner or inner.endswith(ELEMENTS):
            return None
        return inner + ELEMENTS

    def element_type(self, node: ast.expr) -> str | None:
        """The type of the items ``for x in node`` binds: ``p.glob("*")`` (the catalog's
        ``iterates``), ``sorted(...)`` of such a call, a name or attribute typed as a
        container of X (``Tuple[X, ...]``)."""
        if isinstance(node, ast.Call):
            ref = self.resolve(node.func)
            if ref is None:
                return None
            if ref.kind == "method" and ref.type:
                return self.elements.get(f"{ref.type}.{ref.attr}")
            if ref.name in _PASS_ITEMS and len(node.args) == 1:
                return self.element_type(node.args[0])
            return None
        if isinstance(node, ast.Name | ast.Attribute):
            ref = self.resolve(node)
            typ = ref.type if ref is not None and ref.kind == "instance" else None
            return typ[:-len(ELEMENTS)] if typ and typ.endswith(ELEMENTS) else None
        return None

    def enter_modes(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
        """Read ``node``'s mode spreads into ``mode_spreads``; return the outer ones (the
        caller puts them back when it leaves ``node``)."""
        outer = self.mode_spreads
        if self.mode_text and self.mode_keywords:
            self.mode_spreads = _mode_spreads(node, self.mode_keywords)
        return outer

    def value_type(self, node: ast.expr) -> str | None:
        """The type of an expression's value, when a known factory built it."""
        if isinstance(node, ast.Await):
            node = node.value
        if isinstance(node, ast.Call):
            ref = self.resolve(node.func)
            if ref is None:
                return None
            if ref.kind == "method" and ref.type is not None:
                key = f"{ref.type}.{ref.attr}"
                if key in self.factories:
                    return self.factories[key]
                if ref.type in self.objects or ref.type == AMBIGUOUS:
                    return None
                if (ref.attr == "get" and node.args and isinstance(node.args[0], ast.Constant)
                        and isinstance(node.args[0].value, str)
                        and node.args[0].value.isidentifier()):  # a TypedDict's d.get("k")
                    return item_type(key, node.args[0].value)
                return key  # deferred: what the method returns is known project-wide
            if ref.name in self.factories:
                if ref.name in self.modes and _mode_given(node, self.modes[ref.name],
                                                          self.mode_spreads):
                    return None  # psycopg2.connect(dsn, async_=True): not the blocking type
                if ref.name in self.memory_args and isinstance(
                        name := argument(node, self.memory_args[ref.name]), ast.Constant
                        ) and name.value in self.memory_names:
                    return None  # sqlite3.connect(":memory:"): no file behind the object
                return self.factories[ref.name]
            if ref.name == "builtins.super" and not node.args:
                return self._super_type()
            if ref.name in self.offloads:  # await asyncio.to_thread(open, p): a file object
                return self._offloaded_type(node, self.offloads[ref.name])
            if ref.kind == "def" and ref.name in self.returns:  # def make() -> httpx.Client
                return self._annotation_type(self.returns[ref.name])
            if ref.kind == "def":
                return ref.name  # deferred: its return values are read project-wide
            if ref.kind in ("class", "import"):
                return ref.name  # a class (or a factory function: its "type" matches nothing)
            if ref.kind == "self" and ref.type:
                return ref.type  # cls(...) in a classmethod: an instance of the class
            return None
        if isinstance(node, ast.Subscript):  # a TypedDict's field: ``ctx["client"]``
            field = node.slice
            if not isinstance(field, ast.Slice):  # tools[0] of a Tuple[Tool, ...]
                whole = self.resolve(node.value)
                typ = whole.type if whole is not None and whole.kind == "instance" else None
                if typ and typ.endswith(ELEMENTS):
                    return typ[:-len(ELEMENTS)]
            if not (isinstance(field, ast.Constant) and isinstance(field.value, str)
                    and field.value.isidentifier()):
                return None
            base = self.resolve(node.value)
            if base is None or base.kind != "instance" or not base.type:
                return None
            return item_type(f"{base.type}.__getitem__", field.value)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            left = self.value_type(node.left)  # path / "x": a path (a traversable's too)
            if left == "pathlib.Path":
                return left
            return self.factories.get(f"{left}.__truediv__") if left else None
        if isinstance(node, ast.Name | ast.Attribute):
            ref = self.resolve(node)
            if ref is not None and ref.kind == "method" and ref.type:  # x.p: maybe a getter
                return f"{ref.type}.{ref.attr}{GETTER}"
            # an instance, or ``self`` (``return self``: a builder's result is its class)
            return ref.type if ref is not None and ref.kind in ("instance", "self") else None
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
            return _or_type(node, self.value_type)  # ``session or boto3.Session()``
        return None

    def _super_type(self) -> str | None:
        """``super()`` in a method: its class's first base (the lookup goes on from there
        up that base's own bases, ``hierarchy.py``)."""
        scope = self.stack[-1] if self.stack else None
        me = scope.bindings.get(scope.self_name) if scope and scope.self_name else None
        info = self.classes.get(me.target or "") if me is not None and me.kind == "self" else None
        return info.bases[0] if info is not None and info.bases else None

    def _offloaded_type(self, call: ast.Call, index: int) -> str | None:
        """The type a factory handed to an offload wrapper builds in the thread."""
        if len(call.args) <= index:
            return None
        inner = self.resolve(call.args[index])
        return self.factories.get(inner.name) if inner is not None else None

    def resolve(self, node: ast.expr) -> Ref | None:
        """Resolve a Name / Attribute chain / factory call to a Ref, or None if unsure."""
        # the parser's nodes are never subclassed: a type test, cheaper than isinstance
        if type(node) is ast.Name:
            b = self.lookup(node.id)
            if b is None:
                return Ref(f"builtins.{node.id}", "builtin") if node.id in BUILTINS else None
            if b.kind in ("import", "def", "class"):
                return Ref(b.target or "", b.kind)
            if b.kind == "self":
                return Ref(b.target or "", "self", type=b.target)
            if b.target and b.target != AMBIGUOUS:
                return Ref(b.target, "instance", type=b.target)
            return None
        if type(node) is ast.Attribute:
            base = self.resolve(node.value)
            if base is None:
                return None
            if base.kind == "self":
                info = self.classes.get(base.name)
                if info is None:
                    return None
                if node.attr in info.properties and node.attr in info.methods:
                    getter = info.methods[node.attr] + GETTER  # self.p: the getter's result
                    return Ref(getter, "instance", type=getter)
                if node.attr in info.methods:
                    return Ref(info.methods[node.attr], "def")
                typ = info.attrs.get(node.attr)
                if typ and typ != AMBIGUOUS:
                    return Ref(typ, "instance", type=typ)
                if info.bases and node.attr not in info.attrs and node.attr not in info.shadows:
                    # maybe inherited: the run looks ``C.m`` up in the bases
                    return Ref(f"{base.name}.{node.attr}", "method", type=base.name,
                               attr=node.attr)
                return None
            if base.kind == "method" and base.type:  # x.p.m(): m on what the getter gives
                getter = f"{base.type}.{base.attr}{GETTER}"
                return Ref(f"{getter}.{node.attr}", "method", type=getter, attr=node.attr)
            if base.kind == "instance":
                typ = base.type or ""
                if UNION in typ:  # str | Path: a method no scalar has is the real type's
                    typ, *scalars = typ.split(UNION)
                    if any(hasattr(_SCALARS.get(x, object), node.attr) for x in scalars):
                        return None
                elif typ.endswith(ELEMENTS):
                    return None  # a container's own methods: not modelled
                key = f"{typ}.{node.attr}"
                made = self.attributes.get(key)
                if made is not None:  # path.parent: a path
                    return Ref(made, "instance", type=made)
                return Ref(key, "method", type=typ, attr=node.attr)
            if base.kind == "builtin":
                return None
            return Ref(f"{base.name}.{node.attr}", base.kind)
        if type(node) in _VALUE_NODES:
            typ = self.value_type(node)
            return Ref(typ, "instance", type=typ) if typ else None
        return None
