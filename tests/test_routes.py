"""Route templates found without user code, and the one warning when none can be:
driven in process through the middleware's ASGI interface (the servers are in
tests/test_integrations_frameworks.py)."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from corevo_obs.integrations.asgi import StagesMiddleware

UNROUTED = "corevo_task_unrouted_total"


async def _ok(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def _request(mw: StagesMiddleware, path: str, **extra: Any) -> None:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: Any) -> None:
        pass

    scope = {"type": "http", "method": "GET", "path": path, "headers": [], **extra}
    asyncio.run(mw(scope, receive, send))


def _kinds(registry: CollectorRegistry) -> dict[str, float]:
    found: dict[str, float] = {}
    for m in registry.collect():
        for s in m.samples:
            if s.name == "corevo_task_total_seconds_count" and s.value:
                found[s.labels["kind"]] = found.get(s.labels["kind"], 0) + s.value
    return found


def _unrouted(registry: CollectorRegistry, reason: str) -> float | None:
    return registry.get_sample_value(UNROUTED, {"worker": "r0", "reason": reason})


def test_an_unknown_router_is_one_warning_naming_route_of_and_a_counter(caplog):
    registry = CollectorRegistry()
    mw = StagesMiddleware(_ok, worker="r0", registry=registry)
    with caplog.at_level(logging.WARNING, logger="corevo_obs.stages"):
        for i in range(5):
            _request(mw, f"/items/{i}")
    said = [r.getMessage() for r in caplog.records if r.name == "corevo_obs.stages"]
    assert len(said) == 1 and "route_of=" in said[0], said
    assert _kinds(registry) == {"unmatched": 5}
    assert _unrouted(registry, "no_router") == 5
    assert _unrouted(registry, "no_route") == 0  # every reason exists from the start


def test_a_template_a_router_left_in_the_scope_is_used():
    """The middleware inside a framework (Litestar's ``middleware=[...]``, a werkzeug
    rule in ``scope["route"]``): the router already ran."""
    registry = CollectorRegistry()
    mw = StagesMiddleware(_ok, worker="r0", registry=registry)
    _request(mw, "/items/1", path_template="/items/{item_id}")
    _request(mw, "/users/7", route=SimpleNamespace(rule="/users/<int:uid>"))
    assert _kinds(registry) == {"GET /items/{item_id}": 1, "GET /users/<int:uid>": 1}
    assert _unrouted(registry, "no_router") == 0


def test_a_raising_route_of_is_counted_and_the_request_served():
    registry = CollectorRegistry()

    def route_of(scope: Any) -> str | None:
        raise RuntimeError("bug in the host's callback")

    mw = StagesMiddleware(_ok, worker="r0", registry=registry, route_of=route_of)
    _request(mw, "/x")
    _request(mw, "/x")  # a cached path counts again: the counter counts requests
    assert _kinds(registry) == {"unmatched": 2}
    assert _unrouted(registry, "route_of_error") == 2


@pytest.mark.parametrize("framework", ["litestar", "quart"])
def test_the_frameworks_router_is_found_behind_wrappers(framework: str):
    """Behind another middleware's ``.app`` and, for Quart, its bound ``asgi_app``."""
    pytest.importorskip(framework)
    registry = CollectorRegistry()
    if framework == "litestar":
        from litestar import Litestar, get
        from litestar.params import FromPath

        @get("/items/{item_id:int}", sync_to_thread=False)
        def item(item_id: FromPath[int]) -> int:
            return item_id

        inner: Any = Litestar(route_handlers=[item])
        want = "GET /items/{item_id}"
    else:
        from quart import Quart

        quart = Quart(__name__)

        @quart.get("/items/<int:item_id>")
        async def quart_item(item_id: int) -> str:
            return str(item_id)

        inner = quart.asgi_app
        want = "GET /items/<int:item_id>"
    mw = StagesMiddleware(_Wrapper(inner), worker="r0", registry=registry)
    _request(mw, "/items/3")
    _request(mw, "/nothing/here")
    assert _kinds(registry) == {want: 1, "unmatched": 1}
    assert _unrouted(registry, "no_route") == 1 and _unrouted(registry, "no_router") == 0


class _Wrapper:
    """A middleware that keeps what it wraps in ``.app`` (the ASGI convention)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await _ok(scope, receive, send)
