"""Route templates for a bounded task kind: ``/items/{item_id}``, never ``/items/42``.

A kind label must be bounded, so the raw path is never used: a request is named by the
template of the route that will serve it, found before the handler runs (so that the
tracker exists while the handler does), the way the app's own router will find it:

- a template a router that ran first left in the scope (Litestar's
  ``scope["path_template"]``, a ``scope["route"]`` with ``.path`` or ``.rule``), when the
  middleware sits inside the framework;
- Starlette-shaped routes (``route.matches(scope)``, recursing into mounts): Starlette,
  FastAPI and frameworks built on them;
- Litestar's router (``app.asgi_router.handle_routing``, checked against Litestar 2.25);
- a werkzeug ``url_map`` (Quart; the template as written: ``/items/<int:item_id>``).

The app is looked for behind bound methods (Quart's ``app.asgi_app``) and the ``.app``
of wrapping middleware. Paths no route serves are grouped under one kind; an app whose
router is none of these is told to pass ``route_of=`` (see the middleware).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, MutableMapping
from typing import Any, Final

__all__ = [
    "STANDARD_METHODS",
    "UNMATCHED",
    "RouteCache",
    "RouteOf",
    "router_of",
    "scope_template",
    "starlette_route",
]

RouteOf = Callable[[MutableMapping[str, Any]], "str | None"]
_DEPTH: Final = 12  # wrapping middleware looked through for the app
_SLASHES: Final = re.compile(r"/{2,}")


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


def scope_template(scope: MutableMapping[str, Any]) -> str | None:
    """The template a router that ran before the middleware left in ``scope``, if any."""
    found = scope.get("path_template")
    if isinstance(found, str):
        return found
    route = scope.get("route")
    if isinstance(route, str):
        return route
    for attr in ("path", "rule"):
        found = getattr(route, attr, None)
        if isinstance(found, str):
            return found
    return None


def router_of(*apps: Any) -> RouteOf | None:
    """How to find a request's template in the first of ``apps`` (or what they wrap)
    whose router is known, or None when none is."""
    for app in _within(apps):
        router = getattr(app, "asgi_router", None)
        if callable(getattr(router, "handle_routing", None)):
            return _litestar(router)
        url_map = getattr(app, "url_map", None)
        if callable(getattr(url_map, "bind", None)):
            return _werkzeug(url_map)
        routes = getattr(app, "routes", None)
        if isinstance(routes, list) and all(callable(getattr(r, "matches", None))
                                            for r in routes):
            return _starlette(app)
    return None


def _within(apps: Iterable[Any]) -> Iterator[Any]:
    """Each app, then what it is bound to or wraps (``__self__``, ``.app``), once each."""
    seen: set[int] = set()
    for app in apps:
        for _ in range(_DEPTH):
            if app is None or id(app) in seen:
                break
            seen.add(id(app))
            yield app
            owner = getattr(app, "__self__", None)
            app = owner if owner is not None else getattr(app, "app", None)


def _starlette(app: Any) -> RouteOf:
    def route(scope: MutableMapping[str, Any]) -> str | None:
        return starlette_route(scope, app.routes)  # read per call: routes added later count
    return route


def _litestar(router: Any) -> RouteOf:
    """Litestar's own lookup (cached by Litestar), as its router calls it per request."""
    def route(scope: MutableMapping[str, Any]) -> str | None:
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root:
            path = path.split(root, maxsplit=1)[-1]
        try:
            found = router.handle_routing(path=_SLASHES.sub("/", "/" + path.strip("/")),
                                          method=scope.get("method"))
        except Exception:  # noqa: BLE001 - its 404 / 405: no route serves it
            return None
        template = found[4] if isinstance(found, tuple) and len(found) > 4 else None
        return template if isinstance(template, str) else None
    return route


def _werkzeug(url_map: Any) -> RouteOf:
    """A werkzeug ``Map`` matched as Quart matches it (websocket rules for websockets)."""
    def route(scope: MutableMapping[str, Any]) -> str | None:
        path = scope.get("path", "")
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):] or "/"
        websocket = scope.get("type") == "websocket"
        server = "localhost"
        if getattr(url_map, "host_matching", False):
            server = next((v.decode("latin-1") for k, v in scope.get("headers", ())
                           if k == b"host"), server)
        try:
            adapter = url_map.bind(server.lower(), url_scheme=scope.get("scheme", "http"))
            rule, _args = adapter.match(path, method="GET" if websocket else scope.get(
                "method", "GET"), return_rule=True, websocket=websocket)
        except Exception:  # noqa: BLE001 - NotFound, MethodNotAllowed, a redirect
            return None
        template = getattr(rule, "rule", None)
        return template if isinstance(template, str) else None
    return route


class RouteCache:
    """Remembers the template per (method, path) up to a bound, then stops remembering.

    Routing is a linear regex scan over the app's routes; repeated paths skip it. The bound
    keeps paths with ids in them from growing the cache without end.
    """

    __slots__ = ("_found", "_cap")

    def __init__(self, cap: int = 2048) -> None:
        self._found: dict[tuple[str, str, str], tuple[str, str]] = {}
        self._cap = cap

    def get(self, key: tuple[str, str, str]) -> tuple[str, str] | None:
        """(kind, why no template was found: "" when one was) or None when not seen."""
        return self._found.get(key)

    def put(self, key: tuple[str, str, str], kind: str, unrouted: str = "") -> None:
        if len(self._found) < self._cap:
            self._found[key] = (kind, unrouted)
