"""COB100-COB109: a call to a catalogued blocking API (file, HTTP, socket, subprocess,
sleep, sync DB driver, blocking SDK, stdin, waits, CPU-heavy work) made on the event loop.

In a module that imports urllib3, ``x.request("GET", ...)`` on an object of unknown type
that is not awaited is a likely sync request too (flake8-async's ASYNC211).

Matches a resolved qualified name (``requests.get``, ``time.sleep`` through any alias) or a
blocking method of a tracked object type (``Path(p).read_text()``, ``conn.execute()``).
A call returns at once, and is not a hit, when its arguments name a disarming flag of the
catalog (``os.waitpid(pid, os.WNOHANG)``, ``sock.recv(n, socket.MSG_DONTWAIT)``), when its
file argument is an in-memory buffer (``zipfile.ZipFile(io.BytesIO(data))``,
``tarfile.open(fileobj=buf)``), or when the same receiver already did the work
(``proc.wait()`` after ``proc.communicate()`` reaped the child), when a readiness wait
has a constant zero timeout (``select.select(r, w, x, 0)``), or when its file argument is an
open descriptor rather than a path (``open(0, closefd=False)``; ``[descriptors]``).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from ..imports import ImportTracker, Ref, argument, walk
from ..narrowing import Atom
from .base import Family, Spec, register

if TYPE_CHECKING:
    from ..call_catalog import Catalog, TlsSpots


HTTP = "COB101"


@register
class CataloguedCalls(Family):
    family = "catalogued"
    error_codes = {
        "COB100": Spec("sync-file-io", "Sync file or file-system I/O on the event loop.",
                       "sync file I/O {call} inside async def {func}",
                       ("ASYNC230", "ASYNC231", "ASYNC232", "ASYNC240")),
        HTTP: Spec("sync-http", "A sync HTTP request on the event loop.",
                       "sync HTTP call {call} inside async def {func}",
                       ("ASYNC210", "ASYNC211", "ASYNC212")),
        "COB102": Spec("sync-socket", "A blocking socket or name-resolution call on the loop.",
                       "blocking socket call {call} inside async def {func}"),
        "COB103": Spec("sync-subprocess", "Starting or waiting for a process on the loop.",
                       "blocking subprocess/process call {call} inside async def {func}",
                       ("ASYNC220", "ASYNC221", "ASYNC222")),
        "COB104": Spec("sync-sleep", "time.sleep on the event loop.",
                       "{call} sleeps the whole event loop in async def {func}", ("ASYNC251",)),
        "COB105": Spec("sync-db-driver", "A sync database driver call on the loop.",
                       "sync database driver call {call} inside async def {func}"),
        "COB106": Spec("blocking-sdk", "A blocking SDK client call on the loop.",
                       "blocking SDK call {call} inside async def {func}"),
        "COB107": Spec("sync-input", "Waiting on stdin on the loop.",
                       "{call} waits on stdin inside async def {func}", ("ASYNC250",)),
        "COB108": Spec("sync-wait",
                       "Waiting on another thread, process, queue or concurrent future on "
                       "the loop.",
                       "{call} waits on another thread or process inside async def {func}"),
        "COB109": Spec("cpu-heavy",
                       "Deliberately slow CPU work (password hashing, key derivation, model "
                       "inference) on the loop.",
                       "{call} holds the loop for CPU-heavy work inside async def {func}"),
    }


NO_FIELDS: dict[str, str] = {}


def base_constructor(ref: Ref, catalog: Catalog) -> Ref:
    """``super().__init__(...)`` in a project subclass of a catalogued constructor
    (``class Login(httpx.AsyncClient)``): that constructor's call, with these arguments."""
    typ, _, attr = ref.name.rpartition(".")
    return Ref(typ, "class") if attr == "__init__" and typ in catalog.calls else ref


def classify(ref: Ref, catalog: Catalog) -> tuple[str, str, dict[str, str]] | None:
    """(code, display, extra fields) when ``ref`` is a catalogued blocking call (a base's
    ``__init__`` already read as its constructor: :func:`base_constructor`)."""
    if ref.kind == "method" and ref.type is not None and ref.attr is not None:
        rule = catalog.objects.get(ref.type)
        if rule is not None and rule.blocks(ref.attr):
            fields = {"why": rule.why} if rule.why else NO_FIELDS
            return rule.code, f"{ref.type.rpartition('.')[2]}.{ref.attr}()", fields
        if rule is None and generated_stub(ref, catalog):
            assert catalog.stubs is not None
            return catalog.stubs[0], f"{ref.type.rpartition('.')[2]}.{ref.attr}()", NO_FIELDS
        return None
    code = catalog.calls.get(ref.name)
    if code is None:
        return None
    display = ref.name[len("builtins."):] if ref.kind == "builtin" else ref.name
    return code, f"{display}()", NO_FIELDS


def generated_stub(ref: Ref, catalog: Catalog) -> bool:
    """A method attribute of a generated client stub (``svc_pb2_grpc.GreeterStub(ch)
    .SayHello``): a call waits for the answer on a sync channel. The same stub wraps an
    async channel too, whose calls are awaited: a guess, so medium."""
    if catalog.stubs is None or ref.kind != "method" or ref.type is None or not ref.attr:
        return False
    module, _, cls = ref.type.rpartition(".")
    _, modules, classes = catalog.stubs
    return (not ref.attr.startswith("_") and module.endswith(modules)
            and cls.endswith(classes))


def returns_at_once(call: ast.Call, ref: Ref, catalog: Catalog, tracker: ImportTracker,
                    seen: set[str], guard: Iterable[Atom] = (),
                    fds: Callable[[], Mapping[str, str]] = dict) -> bool:
    """True when this catalogued call cannot wait here (see the module docstring)."""
    return (disarmed(call, ref, catalog, tracker) or in_memory(call, ref, catalog, tracker)
            or already_done(call, ref, catalog, seen) or data_url(call, ref, catalog, guard)
            or zero_timeout(call, ref, catalog) or no_target(call, ref, catalog)
            or descriptor(call, ref, catalog, fds)
            or no_ca_file(call, ref, tracker) or imported_already(call, ref, tracker))


IMPORTERS = frozenset({"importlib.import_module", "builtins.__import__"})


def imported_already(call: ast.Call, ref: Ref, tracker: ImportTracker) -> bool:
    """``__import__("asyncio")`` on the loop, or of a module the file imports at its top:
    a lookup in ``sys.modules``, nothing read from disk."""
    arg = argument(call, (0, "name"))
    if ref.name not in IMPORTERS or not (isinstance(arg, ast.Constant)
                                         and isinstance(arg.value, str)):
        return False
    name = arg.value
    if name == "asyncio" or name.startswith("asyncio."):
        return True
    top = tracker.stack[0].bindings.values()
    return any(b.kind == "import" and b.target is not None
               and (b.target == name or b.target.startswith(name + ".")) for b in top)


DEFAULT_CONTEXT = "ssl.create_default_context"
NO_DEFAULT_CERTS = frozenset({"ssl.Purpose.CLIENT_AUTH"})  # a server context: CERT_NONE


def no_ca_file(call: ast.Call, ref: Ref, tracker: ImportTracker) -> bool:
    """``ssl.create_default_context`` reads CA files only when given ``cafile``/``capath``,
    or when given no CA at all for a purpose that verifies the peer: ``cadata=`` loads from
    memory, and ``Purpose.CLIENT_AUTH`` (a server's context, ``CERT_NONE``) loads nothing."""
    if ref.name != DEFAULT_CONTEXT or any(k.arg is None for k in call.keywords) or any(
            isinstance(a, ast.Starred) for a in call.args):
        return False
    if _given(call, (1, "cafile")) or _given(call, (2, "capath")):
        return False
    if _given(call, (3, "cadata")):
        return True
    purpose = argument(call, (0, "purpose"))
    named = tracker.resolve(purpose) if isinstance(purpose, ast.Attribute) else None
    return named is not None and named.name in NO_DEFAULT_CERTS


def _given(call: ast.Call, where: tuple[int | str, ...]) -> bool:
    """The argument is there and not the constant None."""
    arg = argument(call, where)
    return arg is not None and not (isinstance(arg, ast.Constant) and arg.value is None)


def zero_timeout(call: ast.Call, ref: Ref, catalog: Catalog) -> bool:
    """``select.select(r, w, x, 0)``, ``poller.poll(0)``: a readiness check, no wait."""
    where = catalog.zero_timeout.get(ref.name)
    arg = argument(call, where) if where else None
    return (isinstance(arg, ast.Constant) and type(arg.value) in (int, float)
            and arg.value == 0)


def no_target(call: ast.Call, ref: Ref, catalog: Catalog) -> bool:
    """``df.to_csv()``, ``df.to_parquet(index=False)``: no file named, the data comes back
    as text or bytes (a ``*args`` / ``**options`` spread may name one)."""
    where = catalog.no_target.get(ref.name)
    return where is not None and argument(call, where) is None and not any(
        isinstance(a, ast.Starred) for a in call.args) and all(
        k.arg is not None for k in call.keywords)


PIPE, FD = "pipe", "fd"  # what a name bound in the function holds (``fds``)
PIPE_FILE = "pipe-file"  # a file object wrapped around a pipe end (``f = open(r)``)


def descriptor(call: ast.Call, ref: Ref, catalog: Catalog,
               fds: Callable[[], Mapping[str, str]]) -> bool:
    """True when the call's file argument is an open descriptor, so no path is resolved
    (``open(0, closefd=False)``, ``os.path.sameopenfile(a, b)``), or it writes into a pipe
    end the same function made (``r, w = os.pipe(); os.write(w, b"x")``). ``fds`` gives
    the names the function binds to descriptors; it is asked only for a plain name."""
    if ref.name in catalog.pipe_writes:
        arg = argument(call, (0, "fd"))
        return isinstance(arg, ast.Name) and fds().get(arg.id) == PIPE
    if ref.name not in catalog.fd_args:
        return False
    where = catalog.fd_args[ref.name]
    if where is None:  # the API takes descriptors only
        return True
    arg = argument(call, where)
    if isinstance(arg, ast.Name):
        return fds().get(arg.id) in (PIPE, FD)
    return arg is not None and is_descriptor(arg, {})


def is_descriptor(node: ast.expr, fds: Mapping[str, str]) -> bool:
    """An int constant, ``x.fileno()``, or a name bound to a descriptor (``fds``)."""
    if isinstance(node, ast.Constant):
        return type(node.value) is int
    if isinstance(node, ast.Call):
        return (isinstance(node.func, ast.Attribute) and node.func.attr == "fileno"
                and not node.args and not node.keywords)
    return isinstance(node, ast.Name) and fds.get(node.id) in (PIPE, FD)


DATA = "data:"


def data_url(call: ast.Call, ref: Ref, catalog: Catalog, guard: Iterable[Atom]) -> bool:
    """True when the URL argument is a ``data:`` URL: a constant, or a parameter the
    enclosing helper tested with ``.startswith("data:")`` on the way here."""
    where = catalog.data_urls.get(ref.name)
    if not where:
        return False
    arg = argument(call, where)
    if isinstance(arg, ast.Constant):
        return isinstance(arg.value, str) and arg.value.startswith(DATA)
    if not isinstance(arg, ast.Name):
        return False
    return any(a.param == arg.id and a.op == "startswith" and a.values and all(
        isinstance(v[1], str) and v[1].startswith(DATA) for v in a.values) for a in guard)


TLS_SCHEMES = ("wss://",)  # websockets' TLS scheme (a URL argument is a WebSocket's)


def default_tls(call: ast.Call, spots: TlsSpots) -> bool:
    """Whether a connection call builds a new default SSL context ([default-tls]): its
    ssl argument is the constant True, or it has none (and no ``**options``) and its URL
    is written with a TLS scheme (a constant, an f-string or a concatenation)."""
    ssl_spots, url_spots = spots
    given = argument(call, ssl_spots)
    if given is not None:
        return isinstance(given, ast.Constant) and given.value is True
    if not url_spots or any(k.arg is None for k in call.keywords):
        return False
    url = argument(call, url_spots)
    while isinstance(url, ast.BinOp) and isinstance(url.op, ast.Add):
        url = url.left
    if isinstance(url, ast.JoinedStr) and url.values:
        url = url.values[0]
    return (isinstance(url, ast.Constant) and isinstance(url.value, str)
            and url.value.startswith(TLS_SCHEMES))


def note_methods(call: ast.Call, catalog: Catalog, seen: set[str]) -> None:
    """Remember ``x.communicate`` called or handed to an offload, for :func:`already_done`."""
    for expr in (call.func, *call.args):
        if isinstance(expr, ast.Attribute) and expr.attr in catalog.after_methods:
            seen.add(f"{ast.unparse(expr.value)}.{expr.attr}")


def already_done(call: ast.Call, ref: Ref, catalog: Catalog, seen: set[str]) -> bool:
    """``proc.wait()`` after ``proc.communicate()``: the process has exited."""
    return _after(call, ref, catalog.after, seen)


def checked_first(call: ast.Call, ref: Ref, catalog: Catalog, seen: set[str]) -> bool:
    """``q.get()`` after ``q.empty()`` / ``q.qsize()`` on the same queue: most likely only
    when something waits (``while q.empty(): await ...``), a guess."""
    return _after(call, ref, catalog.checked, seen)


def _after(call: ast.Call, ref: Ref, table: Mapping[str, frozenset[str]],
           seen: set[str]) -> bool:
    needs = table.get(ref.name) if ref.kind == "method" else None
    if not needs or not seen or not isinstance(call.func, ast.Attribute):
        return False
    receiver = ast.unparse(call.func.value)
    return any(f"{receiver}.{m}" in seen for m in needs)


def in_memory(call: ast.Call, ref: Ref, catalog: Catalog, tracker: ImportTracker) -> bool:
    """True when the call's file argument is an in-memory buffer (``io.BytesIO``...), a
    standard stream (``json.dump(x, sys.stdout)``: console output, no disk file) or spells
    the name of an in-memory store (``sqlite3.connect(":memory:")``)."""
    where = catalog.in_memory_args.get(ref.name)
    if not where:
        return False
    for spot in where:
        if isinstance(spot, int):
            arg = call.args[spot] if len(call.args) > spot else None
        else:
            arg = next((k.value for k in call.keywords if k.arg == spot), None)
        if arg is None:
            continue
        if isinstance(arg, ast.Constant) and arg.value in catalog.in_memory_names:
            return True
        if tracker.value_type(arg) in catalog.in_memory_types:
            return True
        if (type(arg) is ast.Attribute and (stream := tracker.resolve(arg)) is not None
                and stream.name in catalog.in_memory_streams):
            return True
    return False


def deferred_buffers(call: ast.Call, ref: Ref, catalog: Catalog,
                     tracker: ImportTracker) -> tuple[str, ...]:
    """The deferred types (``returns.py``) of the call's file arguments: the finding holds
    unless one resolves to an in-memory buffer (``zipfile.ZipFile(make_buf())``)."""
    out: list[str] = []
    for spot in catalog.in_memory_args.get(ref.name, ()):
        if isinstance(spot, int):
            arg = call.args[spot] if len(call.args) > spot else None
        else:
            arg = next((k.value for k in call.keywords if k.arg == spot), None)
        typ = tracker.value_type(arg) if arg is not None else None
        if typ is not None and typ not in catalog.in_memory_types and typ not in catalog.objects:
            out.append(typ)
    return tuple(out)


def _named_flags(call: ast.Call, tracker: ImportTracker, flags: Iterable[str]) -> set[str]:
    """The names among ``flags`` that the call's arguments spell (``os.WNOHANG``, also
    inside ``A | B``)."""
    wanted = frozenset(flags)
    out: set[str] = set()
    if wanted:
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            for node in walk(arg):
                if isinstance(node, ast.Attribute | ast.Name):
                    named = tracker.resolve(node)
                    if named is not None and named.name in wanted:
                        out.add(named.name)
    return out


def quiet_hints(call: ast.Call, catalog: Catalog, tracker: ImportTracker,
                seen: set[str]) -> frozenset[str]:
    """For a method on a receiver typed only project-wide: the disarming flags its
    arguments name and the done-after methods its receiver already ran, so that
    :func:`quieted` can apply :func:`disarmed` and :func:`already_done` once the type is
    known."""
    out = _named_flags(call, tracker, catalog.all_disarming)
    if seen and isinstance(call.func, ast.Attribute) and catalog.after_methods:
        receiver = ast.unparse(call.func.value)
        out.update(m for m in catalog.after_methods if f"{receiver}.{m}" in seen)
    return frozenset(out)


def _disarms(flags: frozenset[str], named: frozenset[str] | set[str]) -> bool:
    """One entry of ``flags`` is named whole: a flag, or every part of an ``a+b`` entry
    (``getnameinfo`` looks nothing up only with both NI_NUMERICHOST and NI_NUMERICSERV)."""
    return any(all(part in named for part in f.split("+")) for f in flags)


ARGUED = "(argued)"  # a hint: the call names a disarming keyword or spreads ``**options``


def constructor_hints(call: ast.Call, catalog: Catalog) -> frozenset[str]:
    """For a call of a project class, which may turn out to be a subclass of a catalogued
    constructor: whether it passes what could disarm that constructor (``verify=ctx``)."""
    if any(k.arg is None or k.arg in catalog.disarming_names for k in call.keywords):
        return frozenset({ARGUED})
    return frozenset()


def quieted(name: str, quiet: frozenset[str], catalog: Catalog) -> bool:
    """The resolved method ``name`` returns at once given these hints."""
    if ARGUED in quiet and name in catalog.disarming_keywords:
        return True
    return bool(quiet and (_disarms(catalog.disarming.get(name, frozenset()), quiet)
                           or catalog.after.get(name, frozenset()) & quiet))


def disarmed(call: ast.Call, ref: Ref, catalog: Catalog, tracker: ImportTracker) -> bool:
    """True when an argument of ``call`` names a flag that makes it return at once, or
    a disarming keyword is given something else than True, None or a string
    (``httpx.AsyncClient(verify=ctx)``: no certificates loaded; ``**options`` may hold it)."""
    spots = catalog.disarming_keywords.get(ref.name)
    if spots:
        given = [k.value for k in call.keywords if k.arg in spots]
        given += [a for i, a in enumerate(call.args) if i in spots]
        if any(k.arg is None for k in call.keywords) or any(not (
                isinstance(v, ast.Constant) and (v.value is True or v.value is None
                                                 or isinstance(v.value, str)))
                for v in given):
            return True
    flags = catalog.disarming.get(ref.name)
    if not flags:
        return False
    parts = {part for f in flags for part in f.split("+")}
    return _disarms(flags, _named_flags(call, tracker, parts))


HTTP_METHODS = frozenset({"get", "post", "put", "patch", "delete", "head", "options", "trace",
                          "connect"})


def likely_http(call: ast.Call, ref: Ref | None) -> str | None:
    """The display of ``x.request("GET", ...)`` on an unknown receiver, else None."""
    func = call.func
    if (ref is None and isinstance(func, ast.Attribute) and func.attr == "request"
            and call.args and isinstance(call.args[0], ast.Constant)
            and isinstance(call.args[0].value, str)
            and call.args[0].value.lower() in HTTP_METHODS):
        return f"{ast.unparse(func)}()"
    return None
