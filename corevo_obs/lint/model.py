"""Plain records passed between the per-file pass (possibly in a worker process) and the
project-wide steps (interprocedural chains, noqa, baseline, output). All picklable."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    col: int
    code: str
    message: str
    context: str = ""  # qualified name of the enclosing function (baseline fingerprint)
    snippet: str = ""  # the stripped source line (baseline fingerprint)


@dataclass
class FuncFacts:
    """What a sync function does when called: its first blocking call and its callees."""

    name: str  # short display name, e.g. ``_write_blob`` or ``Store.put``
    path: str
    line: int
    blocking: str | None = None  # display of the first blocking call, e.g. ``open()``
    marked: bool = False  # decorated with @blocking
    callees: list[str] = field(default_factory=list)


@dataclass(frozen=True)
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


@dataclass
class FileResult:
    path: str
    module: str = ""
    findings: list[Finding] = field(default_factory=list)
    funcs: dict[str, FuncFacts] = field(default_factory=dict)
    reexports: dict[str, str] = field(default_factory=dict)  # mod.name -> imported qualname
    sites: list[CallSite] = field(default_factory=list)
    error: Finding | None = None
    deferred: bool = False  # no ``async`` in it: read, not parsed, unless a chain leads here
