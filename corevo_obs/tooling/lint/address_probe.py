"""``try: ip_address(host)`` / ``except ValueError: gethostbyname(host)``: a helper that
resolves a name only when its argument is not an IP literal, as guards
(``narrowing.ADDRESS``).

Network libraries parse the host first and look it up in DNS only when that fails; a
caller that passes ``"192.0.2.1"`` or ``"::1"`` (most tests, most configs of a device
client) never reaches the lookup. Understood: a ``try`` whose body is one statement that
parses a parameter (``ipaddress.ip_address`` / ``ip_network`` / ``ip_interface`` /
``IPv4Address`` / ``IPv6Address``, as a call, an assignment or a return) and nothing
else; its ``except ValueError`` (or a tuple naming it, ``Exception``, a bare ``except``)
runs only for a value that is no address, its ``else`` only for one that is. A body
doing anything more could raise for another reason, so it guards nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from .imports import Ref
from .narrowing import ADDRESS, Atom

PARSERS = frozenset(f"ipaddress.{name}" for name in (
    "ip_address", "ip_network", "ip_interface", "IPv4Address", "IPv6Address",
    "IPv4Network", "IPv6Network"))
_CAUGHT = frozenset({"builtins.ValueError", "builtins.Exception", "builtins.BaseException",
                     "ipaddress.AddressValueError"})
NEEDLE = b"ipaddress"  # every parser is imported from it, whatever its local name


def parsed(node: ast.Try, resolve: Callable[[ast.expr], Ref | None],
           subject: Callable[[ast.expr], str | None]) -> str | None:
    """The parameter (as ``subject`` names it) the ``try`` body only parses as an
    address, or None."""
    if len(node.body) != 1:
        return None
    stmt = node.body[0]
    value = stmt.value if isinstance(stmt, ast.Expr | ast.Return | ast.Assign) else None
    if (isinstance(stmt, ast.Assign)
            and not all(isinstance(t, ast.Name) for t in stmt.targets)):
        return None  # ``self.x = ip_address(h)``: a setter could raise
    if not (isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords):
        return None
    ref = resolve(value.func)
    if ref is None or ref.name not in PARSERS:
        return None
    return subject(value.args[0])


def guards(node: ast.Try, param: str, resolve: Callable[[ast.expr], Ref | None]
           ) -> tuple[list[Atom | None], Atom]:
    """Per handler the atom its body runs under (None: a handler that catches something
    else, which never runs for a parse error alone), and the ``else`` clause's atom."""
    not_address = Atom(param, ADDRESS).negated()
    out: list[Atom | None] = []
    for handler in node.handlers:
        kind = handler.type
        parts = kind.elts if isinstance(kind, ast.Tuple) else [kind] if kind else []
        caught = not parts or any(
            (ref := resolve(p)) is not None and ref.name in _CAUGHT for p in parts)
        out.append(not_address if caught else None)
    return out, Atom(param, ADDRESS)
