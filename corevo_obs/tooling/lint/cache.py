"""Warm runs: each file's summary (its ``FileResult``: direct findings, sync functions with
their guarded blocking calls and callees, call sites on the loop, constants, re-exports)
stored under a key of the file's bytes, so an unchanged file is not parsed again.

The key is a hash of the file's content, its path and module name, and the run's
fingerprint: the lint's own sources (every module and the catalog of this package), the
effective catalog after the project's config, ``bare-noqa``, Python's version and the
entry format. A changed catalog, config or lint therefore misses every entry.

The summaries live in one *pack* per project (fingerprint and import roots name it): a
line per summary, ``key TAB path TAB entry-JSON``, under one checksum. A run reads it
once and decodes only the lines it asks for; a run that scanned anything writes it anew
(one temp file + ``os.replace``, not a file per summary: a cold run of 1,000 files wrote
1,000 entries): the summaries it used or made, and the old lines of files it did not
look up that still exist. A line of a file looked up under another key (older content)
is dropped, so the pack does not grow with edits. A run over exactly the same files is
answered by a *run entry* (``KEY.json``, its findings). Each line also says whether the
file may run code on the loop (``runner.may_run_on_loop``); a file that may not, and that
no chain has needed yet, has a line with that alone, so a later run neither parses nor
searches it again.

Only the per-file pass is cached. The project-wide step (which call site inherits which
helper's chain) is recomputed from the summaries on every run, in memory: a helper whose
summary changed changes its callers' findings although the callers were not re-parsed.

The directory is shared with other processes and treated as hostile input. A pack or
entry is trusted only when it is a regular file (never through a symlink: every open is
``O_NOFOLLOW`` relative to the directory's descriptor), owned by this user, not writable
by group or others, smaller than ``MAX_PACK`` / ``MAX_ENTRY``, its checksum matches and
it names its own key (a pack: its name); a pack line is used only when it names the same
path, module and content hash as asked and decodes to the shape this version writes. Any
other pack, entry or line is a miss (never a crash), rewritten by this run. Writes go to a
fresh temp name and ``os.replace`` it, so a reader sees a whole file or none; the run
writes the pack, forked scan processes only build its lines. Results that carry a COB900
(unparsable file) are never stored. Packs and entries no run used for a day are pruned
once the directory holds more than ``PRUNE_AT`` (or three times a run's) of them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import hashlib
import json
import os
import re
import secrets
import stat
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .call_catalog import Catalog
from .model import CallSite, Edge, FileResult, Finding, FuncFacts, ParamCall, Pending
from .narrowing import CONJ, OPS, Args, Atom, Guard, Kind, Value, instance
from .noqa import NoqaPolicy

FORMAT = 17
ENV = "COREVO_LINT_CACHE_DIR"
DEFAULT_PARTS = (".corevo-cache", "lint")  # under the project root
MAX_ENTRY = 16 << 20
MAX_PACK = 256 << 20
MAGIC = b"corevo-lint-cache"
PACK_MAGIC = b"corevo-lint-pack"
STALE_TEMP_S = 3600.0
STALE_ENTRY_S = 86400.0
PRUNE_AT = 2000
_ENTRY = re.compile(r"^[0-9a-f]{64}\.(json|pack)$")
_TEMP = re.compile(r"^\.[0-9a-f]{64}\.(json|pack)\.\d+\.[0-9a-f]{8}\.tmp$")
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=32).hexdigest()


@functools.cache
def own_sources() -> str:
    """Hash of this package's modules and catalog: editing the lint invalidates entries."""
    root = Path(__file__).resolve().parent
    h = hashlib.blake2b(digest_size=32)
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.toml")]):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        try:
            h.update(path.read_bytes())
        except OSError:  # pragma: no cover - an installed package we cannot read
            h.update(b"?")
    return h.hexdigest()


def _canon(obj: object) -> object:
    """A JSON-able form of a catalog that does not depend on set or dict order."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return [type(obj).__name__,
                [[f.name, _canon(getattr(obj, f.name))] for f in dataclasses.fields(obj)]]
    if isinstance(obj, dict):
        return sorted(([_canon(k), _canon(v)] for k, v in obj.items()), key=repr)
    if isinstance(obj, set | frozenset):
        return sorted((_canon(v) for v in obj), key=repr)
    if isinstance(obj, tuple | list):
        return [_canon(v) for v in obj]
    return obj


def fingerprint(catalog: Catalog, noqa: NoqaPolicy) -> str:
    """Everything besides a file's own bytes that its summary depends on."""
    text = json.dumps([FORMAT, list(sys.version_info[:2]), own_sources(), [noqa.bare, noqa.peers],
                       _canon(catalog)], default=repr)
    return digest(text.encode())


# -- the entry codec: compact lists, every field checked on the way back -------------
class _Bad(ValueError):
    """An entry that does not have the shape this version writes."""


def _check(ok: bool) -> None:
    if not ok:
        raise _Bad


# the checks below run for every field of every cached summary a warm run reads: each is
# one type test, and a list of strings is checked in one C-level pass (``_strs``)
def _str(x: object) -> str:
    if type(x) is not str:
        raise _Bad
    return x


def _int(x: object) -> int:
    if type(x) is not int:
        raise _Bad
    return x


def _bool(x: object) -> bool:
    if type(x) is not bool:
        raise _Bad
    return x


def _list(x: object, n: int | None = None) -> list[Any]:
    if type(x) is not list or (n is not None and len(x) != n):
        raise _Bad
    return x


_STR = frozenset({str})


def _strs(x: object) -> list[str]:
    """A list of strings."""
    if type(x) is not list or not _STR.issuperset(map(type, x)):
        raise _Bad
    return x


def _enc_const(c: object) -> object:
    if isinstance(c, bytes):
        return {"b": c.hex()}
    if isinstance(c, Kind):
        if c.target is not None:
            return {"k": c.type, "f": c.target}
        if c.size is not None:
            return {"k": c.type, "n": c.size}
        return {"k": c.type} if c.keys is None else {"k": c.type, "keys": list(c.keys)}
    if isinstance(c, tuple):
        return {"t": [_enc_const(v) for v in c]}
    return c


def _dec_const(x: object) -> object:
    if x is None or type(x) in (bool, int, float, str):
        return x
    _check(type(x) is dict and (len(x) == 1 or len(x) == 2
                                and ("keys" in x or "f" in x or "n" in x)))
    assert isinstance(x, dict)
    if "b" in x:
        return bytes.fromhex(_str(x["b"]))
    if "f" in x:
        return Kind(_str(x["k"]), target=_str(x["f"]))
    if "n" in x:
        _check(type(x["n"]) is int)
        return Kind(_str(x["k"]), size=int(x["n"]))
    if "keys" in x:
        return Kind(_str(x["k"]), tuple(map(_str, _list(x["keys"]))))
    if "k" in x:
        return Kind(_str(x["k"]))
    return tuple(_dec_const(v) for v in _list(x.get("t")))


def _enc_value(v: Value) -> list[object]:
    if v[0] == "i":
        cls, args = instance(v)
        return ["i", [cls, _enc_args(args)]]
    if v[0] == "a":
        assert isinstance(v[1], Atom)
        return ["a", _enc_guard((v[1],))[0]]
    if v[0] == CONJ:
        return [CONJ, _enc_guard(v[1])]  # type: ignore[arg-type]
    return [v[0], _enc_const(v[1])]


def _dec_value(x: object) -> Value:
    kind, payload = _list(x, 2)
    _check(kind in ("v", "s", "p", "?", "t", "i", "a", CONJ))
    if kind == "v":
        return ("v", _dec_const(payload))
    if kind == "?":
        _check(payload is None)
        return ("?", None)
    if kind == "i":
        cls, args = _list(payload, 2)
        decoded = _dec_args(args)
        _check(decoded is not None)
        return ("i", (_str(cls), decoded))
    if kind == "a":
        return ("a", _dec_guard([payload])[0])
    if kind == CONJ:
        return (CONJ, _dec_guard(payload))
    return (kind, _str(payload))


def _enc_guard(g: Guard) -> list[object]:
    return [[a.param, a.op, [_enc_value(v) for v in a.values]] for a in g]


def _dec_guard(x: object) -> Guard:
    if x == []:
        return ()
    out = []
    for item in _list(x):
        param, op, values = _list(item, 3)
        _check(op in OPS)
        out.append(Atom(_str(param), op, tuple(map(_dec_value, _list(values)))))
    return tuple(out)


def _enc_args(a: Args | None) -> object:
    if a is None:
        return None
    return [[_enc_value(v) for v in a.positional],
            [[k, _enc_value(v)] for k, v in a.keywords], a.opaque, a.forward, a.more]


def _dec_args(x: object) -> Args | None:
    if x is None:
        return None
    positional, keywords, opaque, forward, more = _list(x, 5)
    _check(type(opaque) is bool and type(forward) is bool and type(more) is bool)
    return Args(tuple(map(_dec_value, _list(positional))),
                tuple(map(_dec_keyword, _list(keywords))), opaque, forward, more)


def _dec_keyword(x: object) -> tuple[str, Value]:
    k, v = _list(x, 2)
    return _str(k), _dec_value(v)


def _enc_facts(qualname: str, f: FuncFacts) -> list[object]:
    return [qualname, f.name, f.line, f.marked,
            [[call, _enc_guard(g)] for call, g in f.blocks],
            [[e.callee, _enc_guard(e.guard), _enc_args(e.args), sorted(e.quiet), e.once]
             for e in f.edges],
            list(f.params), sorted(f.names),
            [[k, _enc_value(v)] for k, v in f.defaults.items()], f.varkw,
            [[k, _enc_guard(g)] for k, g in f.rebinds.items()],
            [[k, _enc_value(v)] for k, v in f.inits.items()],
            [[i, list(types)] for i, types in f.unless.items()], f.getter, f.abstract,
            list(f.wrapped), f.threads]


def _dec_facts(x: object, path: str) -> tuple[str, FuncFacts]:
    (qualname, name, line, marked, blocks, edges, params, names, defaults, varkw,
     rebinds, inits, unless, getter, abstract, wrapped, threads) = _list(x, 17)
    _check(type(marked) is bool and type(varkw) is bool and type(getter) is bool)
    facts = FuncFacts(_str(name), path, _int(line), marked, getter, abstract=_bool(abstract))
    for item in _list(blocks):
        call, guard = _list(item, 2)
        facts.blocks.append((_str(call), _dec_guard(guard)))
    for item in _list(edges):
        callee, guard, args, quiet, once = _list(item, 5)
        facts.edges.append(Edge(_str(callee), _dec_guard(guard), _dec_args(args),
                                frozenset(_strs(quiet)), _bool(once)))
    facts.params = tuple(_strs(params))
    facts.names = frozenset(_strs(names))
    for item in _list(defaults):
        k, v = _list(item, 2)
        facts.defaults[_str(k)] = _dec_value(v)
    facts.varkw = varkw
    facts.wrapped = tuple(_strs(wrapped))
    facts.threads = _bool(threads)
    for item in _list(rebinds):
        k, g = _list(item, 2)
        facts.rebinds[_str(k)] = _dec_guard(g)
    for item in _list(inits):
        k, v = _list(item, 2)
        facts.inits[_str(k)] = _dec_value(v)
    for item in _list(unless):
        i, types = _list(item, 2)
        _check(0 <= _int(i) < len(facts.blocks))
        facts.unless[_int(i)] = tuple(_strs(types))
    return _str(qualname), facts


def _enc_site(s: CallSite) -> list[object]:
    return [s.callee, s.line, s.col, s.func, s.context, s.snippet,
            None if s.noqa is None else sorted(s.noqa), _enc_args(s.args), sorted(s.quiet),
            s.low, s.awaited]


def _dec_site(x: object, path: str) -> CallSite:
    callee, line, col, func, context, snippet, noqa, args, quiet, low, awaited = _list(x, 11)
    codes = None if noqa is None else frozenset(_strs(noqa))
    return CallSite(_str(callee), path, _int(line), _int(col), _str(func), _str(context),
                    _str(snippet), codes, _dec_args(args),
                    frozenset(_strs(quiet)), _bool(low), _bool(awaited))


def encode(result: FileResult) -> dict[str, object]:
    """The JSON form of a per-file summary (the path is stored once, by the entry)."""
    return {
        "findings": [_enc_finding(f) for f in result.findings],
        "funcs": [_enc_facts(q, f) for q, f in result.funcs.items()],
        "sites": [_enc_site(s) for s in result.sites],
        "reexports": [[k, v] for k, v in result.reexports.items()],
        "constants": [[k, _enc_const(v)] for k, v in result.constants.items()],
        "written": sorted(result.written),
        "returns": [[k, v] for k, v in result.returns.items()],
        "pending": [[_enc_finding(p.finding), list(p.unless)] for p in result.pending],
        "bases": [[k, list(v)] for k, v in result.bases.items()],
        "shadows": [[k, sorted(v)] for k, v in result.shadows.items()],
        "callbacks": [_enc_site(s) for s in result.callbacks],
        "hands": [_enc_site(s) for s in result.hands],
        "param_calls": [[c.func, c.param, list(c.params), sorted(c.names), _enc_site(c.site)]
                        for c in result.param_calls],
    }


def _enc_finding(f: Finding) -> list[object]:
    return [f.line, f.col, f.code, f.message, f.context, f.snippet, f.confidence, list(f.via),
            f.source]


def _dec_finding(x: object, path: str) -> Finding:
    line, col, code, msg, context, snippet, confidence, via, source = _list(x, 9)
    return Finding(path, _int(line), _int(col), _str(code), _str(msg), _str(context),
                   _str(snippet), _str(confidence), tuple(_strs(via)),
                   _str(source))


def decode(x: object, path: str, module: str) -> FileResult:
    """The inverse of ``encode``; raises ValueError on anything it would not write."""
    _check(type(x) is dict)
    assert isinstance(x, dict)
    out = FileResult(path=path, module=module)
    out.findings = [_dec_finding(item, path) for item in _list(x["findings"])]
    out.funcs = dict(_dec_facts(item, path) for item in _list(x["funcs"]))
    out.sites = [_dec_site(item, path) for item in _list(x["sites"])]
    out.callbacks = [_dec_site(item, path) for item in _list(x["callbacks"])]
    out.hands = [_dec_site(item, path) for item in _list(x["hands"])]
    for item in _list(x["param_calls"]):
        func, param, params, names, site = _list(item, 5)
        out.param_calls.append(ParamCall(_str(func), _str(param), tuple(_strs(params)),
                                         frozenset(_strs(names)), _dec_site(site, path)))
    for item in _list(x["reexports"]):
        k, v = _list(item, 2)
        out.reexports[_str(k)] = _str(v)
    for item in _list(x["constants"]):
        k, v = _list(item, 2)
        out.constants[_str(k)] = _dec_const(v)
    out.written = frozenset(_strs(x["written"]))
    for item in _list(x["returns"]):
        k, v = _list(item, 2)
        out.returns[_str(k)] = _str(v)
    for item in _list(x["bases"]):
        k, v = _list(item, 2)
        out.bases[_str(k)] = tuple(_strs(v))
    for item in _list(x["shadows"]):
        k, v = _list(item, 2)
        out.shadows[_str(k)] = frozenset(_strs(v))
    for item in _list(x["pending"]):
        finding, unless = _list(item, 2)
        out.pending.append(Pending(_dec_finding(finding, path),
                                   tuple(_strs(unless))))
    return out


# -- the directory -------------------------------------------------------------------
@dataclass
class CacheStats:
    hits: int = 0  # files whose summary came from the cache
    trees: int = 0  # whole runs answered from the cache (nothing changed)
    misses: int = 0
    rejected: int = 0  # present but not trusted (corrupt, foreign, symlink, too big)
    stored: int = 0
    write_errors: int = 0


def _open_dirs(anchor: str, parts: Iterable[str]) -> int:
    """Open (creating) ``anchor/part/...`` without following a symlink below ``anchor``."""
    fd = os.open(anchor, _DIR_FLAGS)
    try:
        for part in parts:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o755, dir_fd=fd)
            sub = os.open(part, _DIR_FLAGS | _NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd


@dataclass
class LintCache:
    """Summaries of files under ``anchor/parts...``; picklable (each process opens the
    directory itself). ``note`` says once why the cache could not be used."""

    anchor: str
    parts: tuple[str, ...]
    fingerprint: str = ""
    stats: CacheStats = field(default_factory=CacheStats)
    note: str = ""
    used: set[str] = field(default_factory=set)
    scope: str = ""  # the project (its import roots): names the pack this run reads
    _pack: dict[str, bytes] | None = field(default=None, repr=False, compare=False)
    _new: dict[str, bytes] = field(default_factory=dict, repr=False, compare=False)
    _marks: set[str] = field(default_factory=set, repr=False, compare=False)  # keys of _new
    _hits: set[str] = field(default_factory=set, repr=False, compare=False)
    _seen: set[str] = field(default_factory=set, repr=False, compare=False)
    _fd: int | None = field(default=None, repr=False, compare=False)
    _pid: int = field(default=0, repr=False, compare=False)

    @classmethod
    def at(cls, directory: str | os.PathLike[str]) -> LintCache:
        """A cache in ``directory`` (created); only its last part must not be a symlink."""
        path = os.path.abspath(directory)
        parent, name = os.path.split(path)
        return cls(parent or "/", (name,) if name else ())

    @classmethod
    def for_project(cls, root: str | os.PathLike[str]) -> LintCache:
        """The default: ``ROOT/.corevo-cache/lint``, neither part a symlink."""
        return cls(os.path.abspath(root), DEFAULT_PARTS)

    @property
    def directory(self) -> str:
        return os.path.join(self.anchor, *self.parts)

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state["_fd"], state["_pid"], state["_pack"] = None, 0, None
        state["_new"], state["_hits"], state["_seen"], state["_marks"] = {}, set(), set(), set()
        return state

    def _dir(self) -> int | None:
        if self._pid == os.getpid():
            return self._fd
        self._pid, self._fd = os.getpid(), None
        try:
            os.makedirs(self.anchor, exist_ok=True)
            self._fd = _open_dirs(self.anchor, self.parts)
        except OSError as exc:
            link = exc.errno in (errno.ELOOP, errno.ENOTDIR)
            why = "a symlink" if link else (exc.strerror or str(exc))
            self.note = f"cache {self.directory} not used ({why})"
            return None
        self._mark_ignored(self._fd)
        return self._fd

    @staticmethod
    def _mark_ignored(fd: int) -> None:
        """A ``.gitignore`` of ``*`` inside, so the cache is never committed by accident."""
        with contextlib.suppress(OSError):
            efd = os.open(".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW,
                          0o644, dir_fd=fd)
            try:
                os.write(efd, b"# written by corevo-obs lint\n*\n")
            finally:
                os.close(efd)

    def key(self, path: str, module: str, is_package: bool, content: str) -> str:
        return digest(json.dumps([self.fingerprint, path, module, is_package, content])
                      .encode())

    def load(self, key: str, path: str, module: str, content: str, *,
             full: bool = True) -> FileResult | None:
        """The stored summary, or None (missing or not trusted: see the module docstring).
        Unless ``full`` (a chain needs the file read), a file stored as not running code
        on the loop comes back deferred, whether or not its summary is stored too."""
        self._seen.add(path)
        line = self._lines().get(key)
        if line is None:
            self.stats.misses += 1
            return None
        try:
            _, stored_path, body = line.split(b"\t")
            entry = json.loads(body)
            _check(json.loads(stored_path) == path and type(entry) is dict
                   and entry.get("module") == module and entry.get("content") == content
                   and type(entry.get("loop")) is bool)
            if not full and not entry["loop"]:
                self._hits.add(key)
                return FileResult(path=path, module=module, deferred=True, content=content)
            if "result" not in entry:  # only known not to run on the loop: read it now
                self.stats.misses += 1
                return None
            result = decode(entry["result"], path, module)
        except Exception:  # noqa: BLE001 - any malformed entry is a miss, never a crash
            self.stats.rejected += 1
            return None
        result.content = content
        self._hits.add(key)
        self.stats.hits += 1
        return result

    def entry(self, key: str, result: FileResult, content: str, *,
              on_loop: bool = True) -> bytes | None:
        """The pack line of a summary (a deferred result's: that it does not run on the
        loop), or None for one never stored (COB900). Pure: a worker builds it, the process
        that writes the pack ``add`` s it."""
        if result.error is not None:
            return None
        fields: dict[str, object] = {"module": result.module, "content": content,
                                     "loop": on_loop and not result.deferred}
        if not result.deferred:
            fields["result"] = encode(result)
        body = json.dumps(fields, separators=(",", ":"))
        return f"{key}\t{json.dumps(result.path)}\t{body}".encode()  # ASCII: no raw tab/newline

    def add(self, key: str, line: bytes, *, summary: bool = True) -> None:
        """Keep ``line`` (from ``entry``) for the pack ``flush`` writes; ``summary``: a
        file's summary, not only the note that it does not run on the loop (the stats
        count summaries)."""
        self._new[key] = line
        if summary:
            self._marks.discard(key)
        else:
            self._marks.add(key)

    def store(self, key: str, result: FileResult, content: str) -> None:
        """``entry`` + ``add`` in one process."""
        line = self.entry(key, result, content)
        if line is not None:
            self.add(key, line, summary=not result.deferred)

    def _pack_name(self) -> str:
        return digest(json.dumps([self.fingerprint, "pack", self.scope]).encode()) + ".pack"

    def _lines(self) -> dict[str, bytes]:
        """This project's pack, read and checked once per run: key -> its line."""
        if self._pack is not None:
            return self._pack
        self._pack = {}
        fd = self._dir()
        if fd is None:
            return self._pack
        name = self._pack_name()
        self.used.add(name[:-5])
        data = self._read(fd, name, MAX_PACK, missing=False)
        if data is None:
            return self._pack
        try:
            head, _, body = data.partition(b"\n")
            magic, version, checksum = head.split(b" ")
            _check(magic == PACK_MAGIC and version == str(FORMAT).encode()
                   and checksum.decode("ascii") == digest(body))
            first, _, rest = body.partition(b"\n")
            _check(first == name[:-5].encode())
            lines = {}
            for line in rest.split(b"\n"):
                if line:
                    _check(line[64:65] == b"\t")
                    lines[line[:64].decode("ascii")] = line
        except Exception:  # noqa: BLE001 - a malformed pack is a miss of every entry
            self.stats.rejected += 1
            return self._pack
        self._pack = lines
        return lines

    def flush(self) -> None:
        """Write this run's new summaries as one pack (one file, not one per summary),
        replacing the pack read: it keeps the entries this run used and those of files it
        did not look up that still exist; an entry of a file looked up this run under
        another key (older content, another config) is dropped."""
        if not self._new:
            return
        fd = self._dir()
        if fd is None:
            return
        keep = dict(self._new)
        for key, line in (self._pack or {}).items():
            if key in keep:
                continue
            if key in self._hits:
                keep[key] = line
                continue
            try:
                path = json.loads(line.split(b"\t")[1])
            except Exception:  # noqa: BLE001, S112 - a malformed line is dropped
                continue
            if type(path) is str and path not in self._seen and os.path.isfile(path):
                keep[key] = line
        name = self._pack_name()
        self.used.add(name[:-5])
        # hashed and written line by line: no joined copy of a pack of many megabytes
        body = [name[:-5].encode(), *(keep[k] for k in sorted(keep))]
        h = hashlib.blake2b(digest_size=32)
        for line in body:
            h.update(line)
            h.update(b"\n")
        head = b"%s %d %s" % (PACK_MAGIC, FORMAT, h.hexdigest().encode())
        if len(head) + sum(len(line) + 1 for line in body) + 1 > MAX_PACK:
            self.stats.write_errors += 1
        elif self._write(fd, name, [head, *body]):
            self.stats.stored += len(self._new) - len(self._marks)
        self._new.clear()
        self._marks.clear()

    def tree_key(self, files: Iterable[tuple[str, str, bool, str]]) -> str:
        """Key of a whole run: every file's (path, module, is-package, content hash)."""
        return digest(json.dumps([self.fingerprint, "tree", list(files)]).encode())

    def load_tree(self, key: str) -> list[Finding] | None:
        """The findings of a run over exactly the same files, or None."""
        entry = self._entry(key, {"tree": True})
        if entry is None:
            return None
        try:
            findings = [_dec_finding(f[1:], _str(f[0]))
                        for f in (_list(f, 10) for f in _list(entry["findings"]))]
        except Exception:  # noqa: BLE001 - a malformed entry is a miss
            self.stats.rejected += 1
            return None
        self.stats.trees += 1
        return findings

    def store_tree(self, key: str, findings: Iterable[Finding]) -> None:
        self._put(key, {"tree": True, "findings": [[f.path, *_enc_finding(f)]
                                                    for f in findings]})

    def _entry(self, key: str, expect: dict[str, object]) -> dict[str, Any] | None:
        """The verified JSON object of entry ``key`` whose fields include ``expect``."""
        fd = self._dir()
        if fd is None:
            return None
        self.used.add(key)
        data = self._read(fd, f"{key}.json", MAX_ENTRY)
        if data is None:
            return None
        try:
            head, _, body = data.partition(b"\n")
            magic, version, checksum = head.split(b" ")
            _check(magic == MAGIC and version == str(FORMAT).encode()
                   and checksum.decode("ascii") == digest(body))
            entry = json.loads(body)
            _check(type(entry) is dict and entry.get("key") == key
                   and all(entry.get(k) == v for k, v in expect.items()))
        except Exception:  # noqa: BLE001 - any malformed entry is a miss, never a crash
            self.stats.rejected += 1
            return None
        return entry  # type: ignore[no-any-return]

    def _read(self, fd: int, name: str, limit: int, *, missing: bool = True) -> bytes | None:
        """A trusted file's bytes, else None (counted as a miss when ``missing``, and as
        rejected when present but not trusted)."""
        try:
            efd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW
                          | getattr(os, "O_CLOEXEC", 0), dir_fd=fd)
        except FileNotFoundError:
            self.stats.misses += missing
            return None
        except OSError:  # a symlink (ELOOP), a directory we cannot read...
            self.stats.rejected += 1
            return None
        try:
            st = os.fstat(efd)
            if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid()
                    or st.st_mode & 0o022 or st.st_size > limit):
                self.stats.rejected += 1
                return None
            chunks, left = [], st.st_size + 1
            while left > 0 and (chunk := os.read(efd, min(left, 1 << 20))):
                chunks.append(chunk)
                left -= len(chunk)
            return b"".join(chunks)
        except OSError:
            self.stats.rejected += 1
            return None
        finally:
            os.close(efd)

    def _put(self, key: str, fields: dict[str, object]) -> None:
        """Write entry ``key`` (a checksummed JSON object)."""
        fd = self._dir()
        if fd is None:
            return
        self.used.add(key)
        body = json.dumps({"key": key, **fields}, separators=(",", ":")).encode()
        data = b"%s %d %s\n%s" % (MAGIC, FORMAT, digest(body).encode(), body)
        if self._write(fd, f"{key}.json", [data], lines=False):
            self.stats.stored += 1

    def _write(self, fd: int, name: str, parts: list[bytes], *, lines: bool = True) -> bool:
        """Write ``parts`` (each followed by a newline when ``lines``) as ``name``,
        atomically (temp + replace); a failure is only counted."""
        tmp = f".{name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            efd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW
                          | getattr(os, "O_CLOEXEC", 0), 0o644, dir_fd=fd)
            with open(efd, "wb", buffering=1 << 20) as fh:  # closes efd
                for part in parts:
                    fh.write(part)
                    if lines:
                        fh.write(b"\n")
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except OSError:
            self.stats.write_errors += 1
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            return False
        return True

    def prune(self, now: Callable[[], float] = time.time) -> int:
        """Once the directory holds more than ``max(PRUNE_AT, 3 x this run's)`` entries, drop
        those this run did not use that are older than a day; and temp files older than
        an hour (a writer killed mid-write). Returns the files removed."""
        fd = self._dir()
        if fd is None:
            return 0
        try:
            with os.scandir(fd) as it:
                names = [e.name for e in it]
        except OSError:
            return 0
        entries = [n for n in names if _ENTRY.match(n)]
        candidates = [n for n in names if _TEMP.match(n)]
        if len(entries) > max(PRUNE_AT, 3 * len(self.used)):
            candidates += [n for n in entries if n[:-5] not in self.used]
        removed = 0
        for name in candidates:
            with contextlib.suppress(OSError):
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                age = now() - st.st_mtime
                if age > (STALE_TEMP_S if name.startswith(".") else STALE_ENTRY_S):
                    os.unlink(name, dir_fd=fd)
                    removed += 1
        return removed

    def close(self) -> None:
        if self._fd is not None and self._pid == os.getpid():
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd, self._pid = None, 0
