"""Lint a tree: find files, scan them (in parallel on large trees), then the
project-wide steps: interprocedural chains, noqa on chain sites, ignored codes."""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import gc
import json
import os
import re
import stat
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from ...core.errors import ConfigError
from ...core.fileio import read_regular
from .cache import LintCache, digest, fingerprint
from .call_catalog import Catalog, load_catalog
from .config import LintConfig
from .handed import handed_calls, handed_targets
from .hierarchy import Hierarchy
from .model import READ, UNNAMED, CallSite, FileResult, Finding, FuncFacts
from .noqa import NoqaPolicy
from .observed import FrameIndex, Stall, blocking_facts
from .returns import AMBIGUOUS, ReturnTypes, follow_reexport
from .rules import message, meta
from .rules.chains import MAX_REEXPORT_HOPS, ChainIndex, Verdict
from .scan import scan_source

SKIP_DIRS = frozenset({"__pycache__", "node_modules", "venv", ".venv", ".git", ".tox"})
# files to parse before worker processes pay for their start-up (a warm run never forks)
PARALLEL_MIN_FILES = 64


@dataclass
class LintResult:
    findings: list[Finding] = field(default_factory=list)
    errors: list[Finding] = field(default_factory=list)  # COB900: unparsable or unreadable
    files: int = 0
    unmatched: list[Stall] = field(default_factory=list)  # stalls in no sync function here


def iter_files(paths: Sequence[str], exclude: Sequence[str] = (),
               unreadable: list[tuple[str, str]] | None = None) -> Iterator[str]:
    """Python files under ``paths`` (files named explicitly are always included).

    A directory that cannot be listed is appended to ``unreadable`` as (path, reason)
    instead of being skipped in silence: its findings would be lost. Whatever is named
    ``*.py`` is yielded, a FIFO or socket too; the scan reports it without opening it
    blocking.
    """
    def skipped(exc: OSError) -> None:
        if unreadable is not None:
            unreadable.append((os.path.normpath(exc.filename or "?"),
                               exc.strerror or str(exc)))

    for raw in paths:
        try:
            is_dir = stat.S_ISDIR(os.stat(raw).st_mode)
        except FileNotFoundError:
            raise ConfigError("no such file or directory", source=raw) from None
        except OSError as exc:
            skipped(exc)
            continue
        if not is_dir:
            yield os.path.normpath(raw)
            continue
        for dirpath, dirnames, filenames in os.walk(raw, onerror=skipped):
            dirnames[:] = sorted(d for d in dirnames
                                 if d not in SKIP_DIRS and not d.startswith("."))
            for name in sorted(filenames):
                if name.endswith(".py"):
                    path = os.path.normpath(os.path.join(dirpath, name))
                    if not _excluded(Path(path).as_posix(), exclude):
                        yield path


def max_jobs() -> int:
    """The CPUs this process may run on: more scan processes only cost memory."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _excluded(posix: str, patterns: Sequence[str]) -> bool:
    """A glob matches the path or any trailing part of it (``legacy/*`` hits src/legacy/x.py)."""
    parts = posix.split("/")
    tails = ["/".join(parts[i:]) for i in range(len(parts))]
    return any(fnmatch.fnmatch(tail, pat) for pat in patterns for tail in tails)


@functools.lru_cache(maxsize=4096)
def _package_of(directory: Path) -> str:
    """Dotted package of a directory from the ``__init__.py`` chain above it ('' if none)."""
    if not (directory / "__init__.py").is_file() or directory.parent == directory:
        return ""
    parent = _package_of(directory.parent)
    return f"{parent}.{directory.name}" if parent else directory.name


def module_name(path: str, roots: Sequence[Path] = ()) -> tuple[str, bool]:
    """Dotted module name of ``path``, and whether it is a package's ``__init__``.

    The ``__init__.py`` chain names the regular packages; the directories between the
    deepest import root holding them and the topmost one are namespace packages (PEP 420:
    ``root/ns/pkg/mod.py`` is ``ns.pkg.mod`` though ``ns`` has no ``__init__.py``)."""
    directory, name = os.path.split(os.path.abspath(path))
    package = _dotted_package(directory, tuple(map(str, roots)))
    if name == "__init__.py":
        return package or os.path.basename(directory), True
    stem = Path(name).stem
    return (f"{package}.{stem}" if package else stem), False


@functools.lru_cache(maxsize=1 << 14)
def _dotted_package(directory: str, roots: tuple[str, ...]) -> str:
    """The dotted package of the files in ``directory`` (once per directory, not file)."""
    package = _package_of(Path(directory))
    top = directory
    for _ in range(package.count(".") + 1 if package else 0):
        top = os.path.dirname(top)
    space = _namespace(top, roots) if roots else ""
    return ".".join(x for x in (space, package) if x)


@functools.lru_cache(maxsize=1 << 16)
def _namespace(directory: str, roots: tuple[str, ...]) -> str:
    """``a.b`` for ``directory`` = ``root/a/b`` under the deepest import root, else ''."""
    holding = [r for r in roots if directory == r or directory.startswith(r + os.sep)]
    if not holding:
        return ""
    rest = directory[len(max(holding, key=len)) + 1:]  # '' when the package sits in a root
    parts = rest.split(os.sep) if rest else []
    return ".".join(parts) if all(x.isidentifier() for x in parts) else ""


def import_roots(config: LintConfig, paths: Sequence[str] = ()) -> tuple[Path, ...]:
    """Where imports start: the config's ``src`` directories, else the project directory
    and its ``src/`` (ruff's default), relative to the config file (or the current one).
    Without a config file, the ``src/`` of a directory named on the command line is one
    too, and so are the project each named path belongs to (the nearest directory above
    it with a project file) and its ``src/``: ``corevo-obs lint proj`` from a workspace
    reads ``proj/pkg`` as ``pkg``, as linting from inside proj does."""
    base = Path(config.root or os.getcwd()).resolve()
    if config.src:
        return tuple(base / d for d in config.src)
    named: list[Path] = []
    homes: dict[str, str | None] = {}
    for p in [] if config.root else paths:
        if p == "-" or not os.path.exists(p):
            continue
        given = os.path.abspath(p)
        is_dir = os.path.isdir(given)
        if is_dir:
            named.append(Path(given) / "src")
        home = _project_of(given if is_dir else os.path.dirname(given), homes)
        if home is not None:
            named += [Path(home), Path(home) / "src"]
    named = [d.resolve() for d in dict.fromkeys(named) if d.is_dir()]
    return tuple(dict.fromkeys([base, base / "src", *named]))


def _project_of(directory: str, memo: dict[str, str | None]) -> str | None:
    """The nearest directory at or above ``directory`` holding a project file (once per
    directory: a run given a thousand files asks once per folder, not per file)."""
    if directory not in memo:
        parent = os.path.dirname(directory)
        memo[directory] = directory if any(
            os.path.exists(os.path.join(directory, f)) for f in _PROJECT_FILES) else (
            None if parent == directory else _project_of(parent, memo))
    return memo[directory]


_PROJECT_FILES = ("pyproject.toml", "setup.py", "setup.cfg", ".git")


def installed_dirs(config: LintConfig) -> tuple[Path, ...]:
    """Where chains may enter installed packages: the config's ``installed`` directories
    (relative to its file), and with ``follow-installed`` this Python's site-packages.
    A named directory that does not exist is an error, not a silent no-op."""
    base = Path(config.root or os.getcwd()).resolve()
    named = [base / d for d in config.installed]
    missing = [str(d) for d in named if not d.is_dir()]
    if missing:
        raise ConfigError(f"installed: not a directory: {', '.join(missing)}",
                          source=config.source)
    dirs = [*named, *(map(Path, _site_dirs()) if config.follow_installed else ())]
    return tuple(dict.fromkeys(d.resolve() for d in dirs if d.is_dir()))


def _site_dirs() -> list[str]:
    import site
    import sysconfig
    paths = sysconfig.get_paths()
    return [*site.getsitepackages(), site.getusersitepackages(), paths["purelib"],
            paths["platlib"]]


@functools.lru_cache(maxsize=1 << 14)
def _installed_file(module: str, dirs: tuple[str, ...]) -> str | None:
    """The file of an installed module (``pkg/mod.py`` or ``pkg/mod/__init__.py``) in the
    first directory that has it; found by name, nothing is imported."""
    parts = module.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    for d in dirs:
        base = os.path.join(d, *parts)
        for candidate in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(candidate):
                return candidate
    return None


def _installed_owner(name: str, dirs: tuple[str, ...]) -> tuple[str, str] | None:
    """(module, file) for the longest dotted prefix of ``name`` that is an installed
    module (a module of the tree is looked for first, by ``_owner_module``)."""
    name = name.rpartition(".")[0]  # the last part is the function, class or attribute
    while name:
        path = _installed_file(name, dirs)
        if path is not None:
            return name, path
        name = name.rpartition(".")[0]
    return None


MAX_INSTALLED_FILES = 2_000  # installed modules one run reads at most


_WORKER: tuple[Catalog, NoqaPolicy, LintCache | None] | None = None


_ROOTS: tuple[Path, ...] = ()
_MODULES: dict[str, tuple[str, bool]] = {}  # this run's module_name of each file, once

# what a scan hands back: the summary, and its cache key and pack line when one is new
Scanned = tuple[FileResult, str, bytes | None]


def _init_worker(catalog: Catalog, noqa: NoqaPolicy, cache: LintCache | None,
                 roots: tuple[Path, ...] = ()) -> None:
    global _WORKER, _ROOTS
    _WORKER = (catalog, noqa, cache)
    _ROOTS = roots


def _module(path: str) -> tuple[str, bool]:
    found = _MODULES.get(path)
    if found is None:
        found = _MODULES[path] = module_name(path, _ROOTS)
    return found


def _probe(path: str, full: bool, content: str) -> FileResult | None:
    """The cached summary of a file this run already read and hashed (``content``), or
    that it does not run on the loop (deferred), or None: it is to be read."""
    assert _WORKER is not None
    cache = _WORKER[2]
    assert cache is not None
    module, is_package = _module(path)
    return cache.load(cache.key(path, module, is_package, content), path, module, content,
                      full=full)


def _scan_path(task: tuple[str, bool, bool]) -> Scanned:
    """The file's summary: from the cache when it holds one (looked up unless ``_probe``
    already missed), else scanned, with the line to store it by."""
    path, full, lookup = task
    assert _WORKER is not None
    catalog, noqa, cache = _WORKER
    try:
        source = read_regular(path)  # a FIFO named a.py must not hang the run
    except OSError as exc:
        result = FileResult(path=path)
        result.error = Finding(path, 1, 1, meta.PARSE,
                               message(meta.PARSE, error=str(exc.strerror or exc)))
        return result, "", None
    module, is_package = _module(path)
    on_loop = may_run_on_loop(source, catalog)
    content = key = ""
    if cache is not None:
        content = digest(source)
        key = cache.key(path, module, is_package, content)
    if not full and not on_loop:  # parsed if a chain needs it; cached as such
        result = FileResult(path=path, module=module, deferred=True, content=content)
        return result, key, None if cache is None else cache.entry(key, result, content)
    hit = cache.load(key, path, module, content) if cache is not None and lookup else None
    if hit is not None:
        return hit, "", None
    result = scan_source(path, module, source, catalog, is_package=is_package,
                         noqa=noqa)
    if cache is None:
        return result, "", None
    result.content = content
    return result, key, cache.entry(key, result, content, on_loop=on_loop)


Task = tuple[str, bool, bool]  # path, full (parse even without ``async``), look up the cache


def _drain(chunks: Sequence[list[Task]], ends: Any, send: Callable[[list[Scanned]], None],
           *, small: bool = False) -> None:
    """Scan chunks until none is left, handing each chunk's results to ``send``. The
    chunks run from the largest files to the smallest; ``ends`` (a shared [front, back]
    pair) gives each chunk to exactly one process: the workers take from the front, the
    lint's own process (``small``), which holds every summary, from the back, so the
    largest trees are parsed elsewhere (its peak memory stays near a serial run's)."""
    while True:
        with ends.get_lock():
            front, back = ends[0], ends[1]
            if front >= back:
                return
            if small:
                i = ends[1] = back - 1
            else:
                i, ends[0] = front, front + 1
        send([_scan_path(t) for t in chunks[i]])


def _worker(chunks: Sequence[list[Task]], ends: Any, conn: Any,
            args: tuple[Catalog, NoqaPolicy, LintCache | None, tuple[Path, ...]]) -> None:
    """A forked scan process: each chunk's results go back as soon as they are made (the
    pickling overlaps the next chunk's scan), then None."""
    _init_worker(*args)
    gc.disable()  # it makes no cycles (see _gc_paused)
    try:
        _drain(chunks, ends, conn.send)
        conn.send(None)
    finally:
        conn.close()


def _receive(conn: Any, into: list[Scanned]) -> None:
    """A reader thread of the parent: a worker's chunks as they come (a worker that died
    just stops the list: the parent scans what is missing)."""
    with contextlib.suppress(EOFError, OSError):
        while (part := conn.recv()) is not None:
            into.extend(part)
    conn.close()


def _size(task: Task) -> int:
    try:
        return os.stat(task[0]).st_size
    except OSError:
        return 0  # its error is the scan's


class _Pool:
    """Scans files in this process plus ``jobs - 1`` forked ones when the batch is large
    enough to pay for them; all take chunks from one shared counter, so the load balances
    and this process's share is never pickled.

    With a cache, this process first takes every summary the cache holds and hands only
    the misses to the scan, which forks only when there are enough of them: a warm run
    never forks. The workers build the cache lines of what they scanned; this process
    keeps them for the run's one pack.
    """

    def __init__(self, catalog: Catalog, noqa: NoqaPolicy, jobs: int, files: int,
                 cache: LintCache | None = None, roots: tuple[Path, ...] = (),
                 known: dict[str, str] | None = None) -> None:
        self._jobs = jobs
        self._cache = cache
        self._known = known or {}
        self._args = (catalog, noqa, cache, roots)
        self._parallel = jobs > 1 and files >= PARALLEL_MIN_FILES
        _init_worker(*self._args)

    def scan(self, files: Sequence[str], *, full: bool) -> list[FileResult]:
        tasks: list[Task] = [(f, full, True) for f in files]
        done: list[FileResult] = []
        if self._cache is not None and self._known:
            todo = []
            for task in tasks:
                known = self._known.get(task[0])
                result = None if known is None else _probe(task[0], full, known)
                if result is None:
                    todo.append((task[0], full, known is None))
                else:
                    done.append(result)
            tasks = todo
        if not self._parallel or len(tasks) < PARALLEL_MIN_FILES:
            scanned = [_scan_path(t) for t in tasks]
        else:
            scanned = self._fork(tasks)
        for result, key, line in scanned:
            if line is not None and self._cache is not None:
                self._cache.add(key, line, summary=not result.deferred)
            done.append(result)
        order = {f: i for i, f in enumerate(files)}
        done.sort(key=lambda r: order[r.path])  # as listed, whichever process scanned it
        return done

    def _fork(self, tasks: list[Task]) -> list[Scanned]:
        ctx = get_context("fork") if hasattr(os, "fork") else get_context()
        tasks = sorted(tasks, key=_size, reverse=True)  # largest first: it also balances
        size = max(2, len(tasks) // (self._jobs * 32))  # small: the last one is the tail
        chunks = [tasks[i:i + size] for i in range(0, len(tasks), size)]
        ends = ctx.Array("i", [0, len(chunks)])
        scanned: list[Scanned] = []
        forked = []
        for _ in range(self._jobs - 1):  # every fork before any reader thread starts
            recv, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(target=_worker, args=(chunks, ends, send, self._args),
                               daemon=True)
            proc.start()
            send.close()
            forked.append((proc, recv))
        workers = []
        for proc, recv in forked:
            reader = threading.Thread(target=_receive, args=(recv, scanned), daemon=True)
            reader.start()
            workers.append((proc, reader))
        _drain(chunks, ends, scanned.extend, small=True)  # list.extend: atomic (GIL)
        for proc, reader in workers:
            reader.join()
            proc.join()
        if len(scanned) < len(tasks):  # a worker died: what it took is scanned here
            have = {r.path for r, _, _ in scanned}
            scanned += [_scan_path(t) for t in tasks if t[0] not in have]
        return scanned

    def close(self) -> None:
        """Nothing outlives a ``scan``: kept for the callers' try/finally."""


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while the files are scanned and resolved: the scan
    makes no reference cycles (``scan_source`` breaks its own), yet each collection pass
    walks every summary kept so far, which made a tenth of a cold run (and two thirds of
    unpickling the workers' results). The caller's setting is restored."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _owner_module(name: str, modules: dict[str, list[str]]) -> str | None:
    """The longest dotted prefix of ``name`` that is a module of the tree."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _scan_tree(files: list[str], catalog: Catalog, noqa: NoqaPolicy,
               jobs: int, cache: LintCache | None = None,
               roots: tuple[Path, ...] = (),
               hashed: dict[str, str] | None = None,
               installed: tuple[Path, ...] = ()) -> list[FileResult]:
    """Visit files with async code, then only the deferred modules a call chain reaches
    (and, with ``installed`` directories, the installed modules it reaches)."""
    pool = _Pool(catalog, noqa, jobs, len(files), cache, (*roots, *installed), hashed)
    dirs = tuple(map(str, installed))
    external: set[str] = set()  # installed modules read (or queued) this run
    try:
        results = pool.scan(files, full=False)
        deferred: dict[str, list[str]] = {}
        for r in results:
            if r.deferred:
                deferred.setdefault(r.module, []).append(r.path)
        done = [r for r in results if not r.deferred]
        # the tree's own packages are never read from an installed copy of them
        own_tops = {r.module.partition(".")[0] for r in results}
        known = {q: f for r in done for q, f in r.funcs.items()}
        reexports = {k: v for r in done for k, v in r.reexports.items()}
        hierarchy = Hierarchy(done, reexports)
        types = ReturnTypes(((q, t) for r in done for q, t in r.returns.items()), reexports,
                            hierarchy)
        frontier = [s.callee for r in done for s in r.sites]
        frontier += handed_targets(done)
        # a protocol callback's class: its bases' modules, to see whether one is a protocol
        frontier += [b for r in done for s in r.callbacks for b in hierarchy.inherited(s.callee)]
        frontier += [t for r in done for p in r.pending for t in p.unless]
        seen: set[str] = set()
        hops: dict[str, int] = {}  # re-export steps taken to reach a name
        abstract: set[str] = set()  # abstract methods reached: their subclasses are read
        subclassing: dict[str, dict[str, list[str]]] = {}  # see _subclass_modules
        while frontier:
            wanted: dict[str, None] = {}
            pending: list[str] = []
            while frontier:
                name = frontier.pop().removesuffix(READ)
                if name in seen:
                    continue
                # a helper's result: what it resolves to, and its method, may be elsewhere
                retyped = [t for t in (types.resolve(name), types.method(name))
                           if t is not None and t != name and t != AMBIGUOUS]
                if retyped:
                    frontier.extend(t for t in retyped if t not in seen)
                facts = known.get(name) or known.get(f"{name}.__init__")
                if facts is not None:
                    seen.add(name)
                    if facts.abstract and name not in abstract:
                        abstract.add(name)
                        subs = _subclass_modules(name, deferred, subclassing)
                        wanted.update(dict.fromkeys(subs))
                        pending.extend(f"{m}.*" for m in subs)
                    frontier.extend(facts.callees)
                    frontier.extend(t for types_ in facts.unless.values() for t in types_)
                    # its decorators' code: whether one runs it in a thread (chains.py)
                    frontier.extend(d for d in facts.wrapped if d != UNNAMED)
                    continue
                # a method a class inherits: its bases' modules (known once B's is read)
                frontier.extend(b for b in hierarchy.inherited(name) if b not in seen)
                target = follow_reexport(name, reexports)
                if target is not None and hops.get(name, 0) < MAX_REEXPORT_HOPS:
                    seen.add(name)
                    hops[target] = hops.get(name, 0) + 1
                    frontier.append(target)
                    continue
                module = _owner_module(name, deferred)
                if (module is None and dirs and len(external) < MAX_INSTALLED_FILES
                        and name.partition(".")[0] not in own_tops):
                    found = _installed_owner(name, dirs)
                    if found is not None and found[0] not in external:
                        module = found[0]
                        external.add(module)
                        deferred[module] = [found[1]]
                if module is not None:
                    wanted[module] = None
                    pending.append(name)
                else:
                    seen.add(name)
            paths = [p for m in wanted for p in deferred.pop(m)]
            if not paths:
                break
            more = pool.scan(paths, full=True)
            done.extend(more)
            known.update((q, f) for r in more for q, f in r.funcs.items())
            # a module read for its subclasses: their methods lead on like any other's
            read_for = {n[:-2] for n in pending if n.endswith(".*")}
            if read_for:
                pending = [*(n for n in pending if not n.endswith(".*")),
                           *(q for r in more if r.module in read_for for q in r.funcs)]
            reexports.update((k, v) for r in more for k, v in r.reexports.items())
            hierarchy.add(more)
            types.add((q, t) for r in more for q, t in r.returns.items())
            frontier = pending
        done.extend(r for r in results if r.deferred)
        return done
    finally:
        pool.close()


_BASES = re.compile(rb"^[ \t]*class\s+\w+\s*\(([^)]*)\)", re.MULTILINE)


def _subclass_modules(method: str, deferred: dict[str, list[str]],
                      index: dict[str, dict[str, list[str]]]) -> list[str]:
    """The deferred modules of the abstract method's own package (its module's parent,
    subpackages included) that name its class as a base (``class SerialDevice(Device):``):
    the implementations a call of it may run. Each package's files are read once a run
    (``index``: package -> base name -> modules), and only when a chain reaches one."""
    owner = method.rpartition(".")[0]
    module, _, short = owner.rpartition(".")
    package = module.rpartition(".")[0] or module
    if package not in index:
        bases: dict[str, list[str]] = {}
        for name, paths in deferred.items():
            if name == package or name.startswith(package + "."):
                for path in paths:
                    try:
                        source = read_regular(path)
                    except OSError:
                        continue
                    for m in _BASES.finditer(source) if b"class" in source else ():
                        for base in re.findall(rb"\w+", m.group(1)):
                            bases.setdefault(base.decode(), []).append(name)
        index[package] = bases
    return [m for m in dict.fromkeys(index[package].get(short, ())) if m in deferred]


def _protocol_callbacks(r: FileResult, hierarchy: Hierarchy,
                        catalog: Catalog) -> list[CallSite]:
    """The file's methods named like protocol callbacks whose class has, project-wide, an
    asyncio protocol among its bases: the loop calls them (``[loop-protocols]``)."""
    return [s for s in r.callbacks
            if any(b in catalog.protocol_types
                   for b in hierarchy.mro(s.callee.rpartition(".")[0])[1:])]


def _resolved(facts: FuncFacts, buffer: Callable[[tuple[str, ...]], bool]) -> FuncFacts:
    """The helper's summary without the blocks whose file argument turned out, project-wide,
    to be an in-memory buffer (``ZipFile(make_buf())`` with ``make_buf`` in another module)."""
    if not facts.unless:
        return facts
    blocks = [b for i, b in enumerate(facts.blocks)
              if i not in facts.unless or not buffer(facts.unless[i])]
    return replace(facts, blocks=blocks, unless={})


def lint_paths(paths: Sequence[str], config: LintConfig | None = None, *,
               jobs: int | None = None, catalog: Catalog | None = None,
               cache: LintCache | None = None, stalls: Sequence[Stall] = ()) -> LintResult:
    """Lint every Python file under ``paths``; findings sorted by path, line, column.

    With ``cache`` (``LintCache.for_project(root)``), unchanged files are not parsed again
    (``cache.py``); the findings are the same as without it. ``stalls`` (``observed.py``)
    add the functions seen blocking at run time as blocking facts.

    Example::

        result = lint_paths(["src"], load_config("pyproject.toml"))
        for f in result.findings:
            print(f.path, f.line, f.code, f.message)
    """
    config = config or LintConfig()
    catalog = catalog or load_catalog(config)
    unreadable: list[tuple[str, str]] = []
    files = list(dict.fromkeys(iter_files(paths, config.exclude, unreadable)))
    workers = min(jobs, max_jobs()) if jobs is not None else max_jobs()
    tree: dict[str, str] | None = None
    tree_key = ""
    roots = import_roots(config, paths)
    installed = installed_dirs(config)
    _MODULES.clear()  # a file's package may differ from the last run's (__init__.py added)
    _init_worker(catalog, config.noqa, cache, (*roots, *installed))
    if cache is not None:
        cache.fingerprint = fingerprint(catalog, config.noqa)
        cache.scope = json.dumps([str(r) for r in (*roots, *installed)])
        tree = _contents(files)
        # an installed package may change under an unchanged tree: no whole-run answer
        if tree is not None and not unreadable and not stalls and not installed:
            tree_key = cache.tree_key((f, *_module(f), tree[f]) for f in files)
            findings = cache.load_tree(tree_key)
            if findings is not None:
                cache.close()
                return LintResult(findings=findings, files=len(files))
    with _gc_paused():
        return _lint_files(files, unreadable, config, workers, catalog, cache, stalls, roots,
                           tree, tree_key, installed, _bases(paths))


def _bases(paths: Sequence[str]) -> tuple[str, ...]:
    """The linted directories (the working directory for a file named alone): where a
    file's path is read from to tell a test module (``ChainIndex.in_tests``)."""
    return tuple(dict.fromkeys(os.path.abspath(p if os.path.isdir(p) else os.curdir)
                               for p in paths))


def _lint_files(files: list[str], unreadable: list[tuple[str, str]], config: LintConfig,
                workers: int, catalog: Catalog, cache: LintCache | None,
                stalls: Sequence[Stall], roots: tuple[Path, ...],
                tree: dict[str, str] | None,
                tree_key: str, installed: tuple[Path, ...] = (),
                bases: tuple[str, ...] = ()) -> LintResult:
    """:func:`lint_paths` once the cache has no whole-tree answer: scan, then resolve."""
    try:
        results = _scan_tree(files, catalog, config.noqa, max(1, workers), cache, roots,
                             tree, installed)
        if cache is not None:
            cache.flush()
            cache.prune()
    finally:
        if cache is not None:
            cache.close()
    out = LintResult(files=len(files))
    out.errors += [Finding(d, 1, 1, meta.PARSE, message(
        meta.PARSE, error=f"cannot list directory ({reason}): its files were not checked"))
        for d, reason in unreadable]
    reexports = {k: v for r in results for k, v in r.reexports.items()}
    hierarchy = Hierarchy(results, reexports)
    written = frozenset(a for r in results for a in r.written)
    types = ReturnTypes(((q, t) for r in results for q, t in r.returns.items()), reexports,
                        hierarchy, written)

    def buffer(unless: tuple[str, ...]) -> bool:
        return any(types.resolve(t) in catalog.in_memory_types for t in unless)

    index = ChainIndex(((q, _resolved(f, buffer)) for r in results for q, f in r.funcs.items()),
                       reexports,
                       {k: v for r in results for k, v in r.constants.items()},
                       written, types, catalog, hierarchy)
    index.bases = bases
    if stalls:
        cites, out.unmatched = blocking_facts(stalls, FrameIndex(
            (q, f.name, f.path, f.line) for q, f in index.funcs.items()))
        index.observe(cites)
    own = set(files)  # an installed module's facts serve chains; its findings are not ours
    for r in results:
        if r.path not in own:
            continue
        if r.error is not None:
            out.errors.append(r.error)
        out.findings.extend(r.findings)
        out.findings.extend(p.finding for p in r.pending if not buffer(p.unless))
        for site in [*r.sites, *_protocol_callbacks(r, hierarchy, catalog)]:
            _report_site(out, site, index.classify(site), catalog, config)
    for candidates in handed_calls(results, own, hierarchy):
        for site, handed in candidates:  # the first def handed in that blocks
            hit = index.classify(site, handed)
            if hit is not None:
                _report_site(out, site, hit, catalog, config)
                break
    out.findings.sort()
    out.errors.sort()
    if (cache is not None and tree is not None and tree_key and not out.errors
            and all(r.content == tree[r.path] for r in results)):
        cache.store_tree(tree_key, out.findings)  # no file changed while it was read
        cache.close()
    return out


def _report_site(out: LintResult, site: CallSite, hit: Verdict | None, catalog: Catalog,
                 config: LintConfig) -> None:
    """A call site's finding, unless it does not block, its code is not selected or its
    line silences it."""
    if hit is None:
        return
    code, fields, confidence, via, source = hit
    if catalog.selection.enabled(code) and not config.noqa.silences(code, site.noqa):
        out.findings.append(Finding(site.path, site.line, site.col, code,
                                    message(code, **fields), site.context, site.snippet,
                                    confidence, tuple(dict.fromkeys(via)), source))


def may_run_on_loop(source: bytes, catalog: Catalog) -> bool:
    """Whether a file may hold code that runs on the loop: an ``async def``, a protocol's
    callback or a callable handed to the loop (its name is written); any other file is
    read only when a chain reaches it."""
    return b"async" in source or any(n in source for n in catalog.loop_needles)


def _contents(files: Sequence[str]) -> dict[str, str] | None:
    """Each file's content hash (read once here, so the cache is probed without reading
    again; whether it may run on the loop is in its cache line), or None when one cannot
    be read (its error is the scan's)."""
    out: dict[str, str] = {}
    for path in files:
        try:
            source = read_regular(path)
        except OSError:
            return None
        out[path] = digest(source)
    return out
