"""What a file object was opened for, so that closing it is judged by what it holds.

``close()`` flushes what was written and nothing else: closing a file opened read-only
(``open(p)``, ``open(p, "rb")``) or created and never written returns at once, so it is
no finding (the rubric's "nothing to flush"). A receiver qualifies when every binding of
it in its scope (a name in the function, ``self.x`` anywhere in the class) is one of the
open calls below with a constant mode, also through ``await asyncio.to_thread(open, ...)``
or ``loop.run_in_executor(None, open, ...)``; anything else (a parameter, a second kind of
binding, a mode that is not a constant) keeps the close a finding, at medium confidence:
whether anything is left to flush is then a guess (docs/lint.md, "Confidence").
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from .imports import Ref, is_none

# opener -> (position, keyword) of its mode, and the mode it defaults to; tempfile's are
# not here: closing a NamedTemporaryFile deletes it
OPENERS: dict[str, tuple[int, str]] = {
    "builtins.open": (1, "r"), "io.open": (1, "r"), "codecs.open": (1, "r"),
    "os.fdopen": (1, "r"), "gzip.open": (1, "rb"), "bz2.open": (1, "rb"),
    "lzma.open": (1, "rb"),
}
OFFLOADS = {"asyncio.to_thread": 0}  # call -> index of the callable; the rest are its args
# uses of a file object that write nothing into it (``flush`` of an unwritten file is a no-op)
_IDLE = frozenset({"close", "name", "closed", "mode", "fileno", "flush", "isatty",
                   "readable", "writable", "seekable", "encoding"})
FILE_TYPE = "io.IOBase"  # the catalog's type of what the openers return

Resolve = Callable[[ast.expr], Ref | None]


def _opened_mode(value: ast.expr, resolve: Resolve) -> str | None:
    """The constant mode of ``open(p, "rb")`` (``await to_thread(open, p, "rb")``,
    ``await loop.run_in_executor(None, open, p)``), None for anything else."""
    if isinstance(value, ast.Await):
        value = value.value
    if not isinstance(value, ast.Call):
        return None
    args, keywords = list(value.args), value.keywords
    ref = resolve(value.func)
    if ref is not None and ref.name in OFFLOADS:
        i = OFFLOADS[ref.name]
        args, ref = args[i + 1:], resolve(args[i]) if len(args) > i else None
    elif isinstance(value.func, ast.Attribute) and value.func.attr == "run_in_executor":
        args, ref = args[2:], resolve(args[1]) if len(args) > 1 else None
        keywords = []
    if ref is None or ref.name not in OPENERS or any(k.arg is None for k in keywords):
        return None
    pos, default = OPENERS[ref.name]
    mode: ast.expr | None = args[pos] if len(args) > pos else next(
        (k.value for k in keywords if k.arg == "mode"), None)
    if mode is None:
        return default
    if any(isinstance(a, ast.Starred) for a in args[:pos + 1]):
        return None
    return mode.value if isinstance(mode, ast.Constant) and type(mode.value) is str else None


def stores(scope: ast.AST, key: str) -> Iterator[ast.expr | None]:
    """What each binding of ``key`` (a name or ``self.x``) in ``scope`` binds it to (None:
    a binding of another kind, ``for``, unpacking, ``+=``, ``del``)."""
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if ast.unparse(target) == key:
                    yield node.value
                elif any(ast.unparse(t) == key for t in ast.walk(target)
                         if isinstance(t, ast.Name | ast.Attribute) and t is not target):
                    yield None
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            if ast.unparse(node.optional_vars) == key:
                yield node.context_expr
        elif isinstance(node, ast.AnnAssign | ast.AugAssign | ast.NamedExpr | ast.For
                        | ast.AsyncFor | ast.Delete):
            targets = node.targets if isinstance(node, ast.Delete) else [node.target]
            if any(ast.unparse(t) == key for t in targets):
                value = node.value if isinstance(node, ast.AnnAssign | ast.NamedExpr) else None
                yield value
        elif isinstance(node, ast.arg) and node.arg == key:
            yield None


def _written(scope: ast.AST, key: str) -> bool:
    """Whether ``key`` is used in ``scope`` otherwise than by the idle attributes (a write,
    or handed to anything that may write into it)."""
    attrs: dict[int, str] = {}
    for node in ast.walk(scope):
        if isinstance(node, ast.Attribute):
            attrs[id(node.value)] = node.attr
    for node in ast.walk(scope):
        if (isinstance(node, ast.Name | ast.Attribute) and isinstance(node.ctx, ast.Load)
                and ast.unparse(node) == key and attrs.get(id(node)) not in _IDLE):
            return True
    return False


QUIET, WRITTEN, UNSURE = "quiet", "written", "unsure"
FLUSHING = frozenset({"close", "flush"})  # wait only when something was written


def flush_state(scope: ast.AST | None, key: str, resolve: Resolve) -> str:
    """``QUIET`` when closing ``key`` in ``scope`` cannot wait: every binding opened it
    read-only, or opened it for writing and nothing in the scope writes into it;
    ``WRITTEN`` when every binding opened it with a known mode and it is written;
    ``UNSURE`` otherwise (whether anything waits to be flushed is a guess)."""
    if scope is None:
        return UNSURE
    # ``self.f = None`` (before it is opened, after it is closed) holds nothing to flush
    modes = [_opened_mode(v, resolve) if v is not None else None for v in stores(scope, key)
             if not is_none(v)]
    if not modes or any(m is None for m in modes):
        return UNSURE
    if all(not set("wax+") & set(m) for m in modes if m is not None):
        return QUIET
    return WRITTEN if _written(scope, key) else QUIET
