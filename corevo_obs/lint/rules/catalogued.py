"""COB100-COB107: a call to a catalogued blocking API (file, HTTP, socket, subprocess,
sleep, sync DB driver, blocking SDK, stdin) made on the event loop.

Matches a resolved qualified name (``requests.get``, ``time.sleep`` through any alias) or a
blocking method of a tracked object type (``Path(p).read_text()``, ``conn.execute()``).
A call whose arguments name a disarming flag of the catalog (``os.waitpid(pid,
os.WNOHANG)``, ``sock.recv(n, socket.MSG_DONTWAIT)``) returns at once and is not a hit.
"""

from __future__ import annotations

import ast

from ..catalog import Catalog
from ..imports import ImportTracker, Ref


def classify(ref: Ref, catalog: Catalog) -> tuple[str, str] | None:
    """(code, display) when ``ref`` is a catalogued blocking call."""
    if ref.kind == "method" and ref.type is not None and ref.attr is not None:
        rule = catalog.objects.get(ref.type)
        if rule is not None and rule.blocks(ref.attr):
            return rule.code, f"{ref.type.rpartition('.')[2]}.{ref.attr}()"
        return None
    code = catalog.calls.get(ref.name)
    if code is None:
        return None
    display = ref.name[len("builtins."):] if ref.kind == "builtin" else ref.name
    return code, f"{display}()"


def disarmed(call: ast.Call, ref: Ref, catalog: Catalog, tracker: ImportTracker) -> bool:
    """True when an argument of ``call`` names a flag that makes it return at once."""
    flags = catalog.disarming.get(ref.name)
    if not flags:
        return False
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        for node in ast.walk(arg):
            if isinstance(node, ast.Attribute | ast.Name):
                named = tracker.resolve(node)
                if named is not None and named.name in flags:
                    return True
    return False
