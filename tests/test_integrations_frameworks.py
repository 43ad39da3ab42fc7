"""Litestar and Quart apps inside the servers users run them with (uvicorn, hypercorn):
``StagesMiddleware`` names each request by its route template with no user option, a
path no route serves is ``unmatched`` and counted ``no_route``, and nothing counts as
``no_router``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
import websockets

from tests.apps import app_env, get, python, samples, serve, value
from tests.conftest import free_port

pytestmark = pytest.mark.system

SERVERS = {
    "litestar": (["-m", "uvicorn", "examples.litestar_app:app"], "/items/{item_id}"),
    "quart": (["-m", "hypercorn", "examples.quart_app:app"], "/items/<int:item_id>"),
}


@pytest.fixture(scope="module", params=sorted(SERVERS))
def served(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    pytest.importorskip(request.param)
    args, template = SERVERS[request.param]
    port = free_port()
    bind = (["--port", str(port), "--log-level", "warning"] if "uvicorn" in args
            else ["--bind", f"127.0.0.1:{port}"])
    with serve(python(*args, *bind), port, app_env(COREVO_WORKER="w0")):
        yield f"http://127.0.0.1:{port}", template


async def _ws(url: str) -> list[str]:
    async with websockets.connect(url) as ws:
        return [str(m) async for m in ws]


def test_route_templates_with_no_user_option(served: tuple[str, str]) -> None:
    url, template = served
    for i in (1, 2, 3):
        assert json.loads(get(f"{url}/items/{i}")) == {"item": i}
    get(f"{url}/no/such/path")
    assert asyncio.run(_ws(url.replace("http://", "ws://") + "/ws")) == [
        "event 0", "event 1", "event 2"]
    found = samples(get(f"{url}/metrics").decode())
    kinds = {dict(labels).get("kind") for name, labels in found
             if name == "corevo_task_total_seconds_count"}
    assert value(found, "corevo_task_total_seconds_count", kind=f"GET {template}") == 3, kinds
    assert value(found, "corevo_task_total_seconds_count", kind="WS /ws") == 1, kinds
    assert value(found, "corevo_task_total_seconds_count", kind="unmatched") == 1, kinds
    assert not [k for k in kinds if k and ("/1" in k or "metrics" in k)], kinds
    unrouted = {r: value(found, "corevo_task_unrouted_total", reason=r)
                for r in ("no_route", "no_router", "route_of_error")}
    assert unrouted == {"no_route": 1, "no_router": 0, "route_of_error": 0}
