"""Plain records passed between the per-file pass (possibly in a worker process) and the
project-wide steps (interprocedural chains, noqa, baseline, output). All picklable."""

from __future__ import annotations

from dataclasses import dataclass, field

from .narrowing import Args, Guard, Value
from .records import compact_pickle


@compact_pickle
@dataclass(frozen=True, order=True, slots=True)
class Finding:
    path: str
    line: int
    col: int
    code: str
    message: str
    context: str = ""  # qualified name of the enclosing function (baseline fingerprint)
    snippet: str = ""  # the stripped source line (baseline fingerprint)
    confidence: str = "high"  # high / medium / low (``CONFIDENCE``, docs/lint.md)
    via: tuple[str, ...] = ()  # files a chain passes through (pre-commit: staged helpers)
    source: str = ""  # where the blocking fact came from when not the catalog (a stall)


FIRST_USE = " [first use]"  # marks a block by a first-use loader (catalog [first-use])
FIRST_CALL = " [first call]"  # a per-process loader's first call (catalog [first-use]): medium
FALLBACK = " [fallback]"  # a block in a clause the project excludes from coverage
GUESSED = (FIRST_USE, FALLBACK)  # a chain ending at one of these is low confidence
# the end of a callee's name read as an attribute (``x.p``, no call): it runs only when it
# resolves to a property getter (``FuncFacts.getter``)
READ = "#read"
UNNAMED = "?"  # a decorator the lint cannot name (``@self.pool.wrap``): its code is unread
# how sure a finding is, weakest first: ``--min-confidence`` keeps those at or above it
CONFIDENCE = ("low", "medium", "high")


@compact_pickle
@dataclass(frozen=True, slots=True)
class Edge:
    """A call from a sync function to a possibly-project function, under ``guard``."""

    callee: str
    guard: Guard = ()
    args: Args | None = None  # None: not known (no argument-sensitive pruning)
    quiet: frozenset[str] = frozenset()  # disarming flags named, methods done (see CallSite)
    once: bool = False  # under ``if <module global> is None:``: a once-per-process memo


@dataclass(slots=True)
class FuncFacts:
    """What a sync function does when called: its blocking calls and its callees, each
    under the guard of its parameters that leads there (``guards.py``)."""

    name: str  # short display name, e.g. ``_write_blob`` or ``Store.put``
    path: str
    line: int
    marked: bool = False  # decorated with @blocking
    getter: bool = False  # a property's getter: reading the attribute calls it
    abstract: bool = False  # @abstractmethod, or a body that only raises NotImplementedError
    blocks: list[tuple[str, Guard]] = field(default_factory=list)  # e.g. ("open()", ())
    edges: list[Edge] = field(default_factory=list)
    params: tuple[str, ...] = ()  # positional parameters, without self / cls
    names: frozenset[str] = frozenset()  # every parameter that a keyword can name
    defaults: dict[str, Value] = field(default_factory=dict)  # constant defaults
    varkw: bool = False  # has **kwargs (keywords beyond ``names`` are forwarded)
    rebinds: dict[str, Guard] = field(default_factory=dict)  # param -> guard of its 1 store
    inits: dict[str, Value] = field(default_factory=dict)  # __init__: "self.x" -> value set
    # index in ``blocks`` -> deferred types of its file arguments: the block holds unless
    # one resolves to an in-memory buffer (``Pending``'s rule, for a helper's calls)
    unless: dict[int, tuple[str, ...]] = field(default_factory=dict)
    # decorators whose effect the lint does not know (``ScanVisitor._unread_decorators``):
    # awaited, a def so decorated runs where its decorator puts it (``ChainIndex.unread``)
    wrapped: tuple[str, ...] = ()
    # a module-level def that hands a function it is given to a thread or an offload: a
    # def it decorates (in any module) runs off the loop (``ScanVisitor._hands_to_thread``)
    threads: bool = False

    @property
    def callees(self) -> list[str]:
        return [e.callee for e in self.edges]

    @property
    def blocking(self) -> str | None:
        """The first call that blocks on every call whatever the arguments (and whatever
        types resolve); a first-use loader does not count."""
        return next((call for i, (call, guard) in enumerate(self.blocks)
                     if not guard and i not in self.unless and not call.endswith(GUESSED)),
                    None)


@compact_pickle
@dataclass(frozen=True, slots=True)
class CallSite:
    """A call from code that runs on the loop to a name that may be a project function."""

    callee: str
    path: str
    line: int
    col: int
    func: str  # display name of the async def
    context: str
    snippet: str
    noqa: frozenset[str] | None  # codes silenced on the line; "*" for a bare noqa
    args: Args | None = None
    # for a method of a receiver whose type is known only project-wide (returns.py): the
    # catalog's disarming flags its arguments name and the done-after methods its receiver
    # already ran (``communicate``), so the catalog's exceptions apply once it resolves
    quiet: frozenset[str] = frozenset()
    # its findings are low confidence: a likely call the code does not show (a class's
    # constructor, built by its users' coroutines), or a once-per-process memo's call
    low: bool = False
    # the call's result is awaited (or handed to ``gather`` / ``create_task``): it returns
    # an awaitable, so a plain def it calls was made into one by a decorator
    awaited: bool = False


@compact_pickle
@dataclass(frozen=True, slots=True)
class ParamCall:
    """Code on the loop calling its own parameter (``return operation()`` in an async
    def): a sync function a caller hands in runs on the loop there. ``site`` is the call,
    its callee left to the functions the run finds handed in."""

    func: str  # qualified name of the def whose parameter is called
    param: str
    params: tuple[str, ...]  # its positional parameters (without self / cls)
    names: frozenset[str]  # the parameters a keyword can name
    site: CallSite


@compact_pickle
@dataclass(frozen=True, slots=True)
class Pending:
    """A direct finding that holds unless one of ``unless`` (deferred types of its file
    arguments, ``returns.py``) resolves to an in-memory buffer type."""

    finding: Finding
    unless: tuple[str, ...]


@dataclass(slots=True)
class FileResult:
    path: str
    module: str = ""
    findings: list[Finding] = field(default_factory=list)
    funcs: dict[str, FuncFacts] = field(default_factory=dict)
    reexports: dict[str, str] = field(default_factory=dict)  # mod.name -> imported qualname
    sites: list[CallSite] = field(default_factory=list)
    constants: dict[str, object] = field(default_factory=dict)  # mod.NAME -> module constant
    error: Finding | None = None
    deferred: bool = False  # no ``async`` in it: read, not parsed, unless a chain leads here
    content: str = ""  # hash of the bytes summarised (set when a cache is in use)
    written: frozenset[str] = frozenset()  # attributes assigned on objects other than self
    returns: dict[str, str] = field(default_factory=dict)  # function -> type it returns
    pending: list[Pending] = field(default_factory=list)
    bases: dict[str, tuple[str, ...]] = field(default_factory=dict)  # class -> its bases
    shadows: dict[str, frozenset[str]] = field(default_factory=dict)  # ``ClassInfo.shadows``
    # methods named like a protocol's callbacks (``data_received``) of classes whose bases
    # are elsewhere, as calls made on the loop: sites if the run finds a protocol base
    callbacks: list[CallSite] = field(default_factory=list)
    param_calls: list[ParamCall] = field(default_factory=list)
    # calls on the loop that hand a function of the tree to another (``retry(save)``):
    # matched against ``param_calls`` by the run
    hands: list[CallSite] = field(default_factory=list)
