"""Route templates for a bounded task kind: ``/items/{item_id}``, never ``/items/42``.

A kind label must be bounded, so the raw path is never used: a request is named by the
template of the route that will serve it, found the way the router itself will find it
(Starlette's ``route.matches(scope)``, recursing into mounts), before the handler runs,
so that the tracker exists while the handler does. Paths no route serves are grouped
under one kind. Works on anything with Starlette-shaped routes (Starlette, FastAPI and
frameworks built on them); other apps pass ``route_of=`` to the middleware.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping
from typing import Any, Final

__all__ = [
    "STANDARD_METHODS",
    "UNMATCHED",
    "RouteCache",
    "starlette_route",
]


UNMATCHED: Final = "unmatched"
#: RFC 9110's methods and PATCH. Any other method a client sends is one kind, ``unmatched``:
#: a method is client input, and ``X0``..``X129`` on a real route must not fill the kinds.
STANDARD_METHODS: Final = frozenset(
    ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"))
_FULL: Final = 2  # starlette.routing.Match.FULL; compared by value to stay import-free


def starlette_route(scope: MutableMapping[str, Any], routes: Iterable[Any]) -> str | None:
    """The template of the route that serves ``scope``, or None when none does.

    A path whose method no route accepts (the router's 405, a partial match) is served by
    no route: None, so methods a client makes up on a real path stay in one kind.
    """
    for route in routes:
        try:
            match, child = route.matches(scope)
        except Exception:  # noqa: BLE001 - an exotic route must not break the request
            continue
        if getattr(match, "value", match) == _FULL:
            return _with_children(route, scope, child)
    return None


def _with_children(
    route: Any, scope: MutableMapping[str, Any], child: dict[str, Any]
) -> str | None:
    path = getattr(route, "path", None)
    if not isinstance(path, str):
        return None
    inner = getattr(route, "routes", None)
    if not inner:  # a plain route, or a mount of an app we cannot see into
        return path or "/"
    rest = starlette_route({**scope, **child}, inner)
    return None if rest is None else (path.rstrip("/") + rest)


class RouteCache:
    """Remembers the template per (method, path) up to a bound, then stops remembering.

    Routing is a linear regex scan over the app's routes; repeated paths skip it. The bound
    keeps paths with ids in them from growing the cache without end.
    """

    __slots__ = ("_found", "_cap")

    def __init__(self, cap: int = 2048) -> None:
        self._found: dict[tuple[str, str, str], str] = {}
        self._cap = cap

    def get(self, key: tuple[str, str, str]) -> str | None:
        return self._found.get(key)

    def put(self, key: tuple[str, str, str], kind: str) -> None:
        if len(self._found) < self._cap:
            self._found[key] = kind
