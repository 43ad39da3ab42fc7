"""The ASGI and aiohttp integrations on real servers: uvicorn and aiohttp.web, real
sockets, a real fixed-latency upstream. Each stage is checked against what the test did:
the delay before a stream's first chunk, the upstream's latency, a proxy's stamp.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest
import websockets

from tests.apps import app_env, get, python, samples, serve, upstream, value
from tests.conftest import free_port

FIRST_CHUNK = 0.2
WS_FIRST = 0.15
UPSTREAM_LATENCY = 0.1
TOLERANCE = 0.010  # the bound on first-event accuracy


@pytest.fixture(scope="module", params=["fastapi", "aiohttp"])
def app_url(request: pytest.FixtureRequest) -> Iterator[str]:
    port = free_port()
    with upstream(UPSTREAM_LATENCY) as up:
        env = app_env(UPSTREAM_URL=up, COREVO_WORKER="w0")
        if request.param == "fastapi":
            cmd = python("-m", "uvicorn", "examples.fastapi_app:app", "--port", str(port),
                         "--log-level", "warning")
        else:
            cmd = python("-m", "examples.aiohttp_app", "--port", str(port))
        with serve(cmd, port, env):
            yield f"http://127.0.0.1:{port}"


async def _ws(url: str) -> list[str]:
    async with websockets.connect(url) as ws:
        return [str(m) async for m in ws]


def _histogram(found: dict, name: str, **labels: str) -> tuple[float, float]:
    return value(found, name + "_count", **labels), value(found, name + "_sum", **labels)


def test_four_stages_without_handler_code(app_url: str) -> None:
    for i in (1, 2, 3, 1):
        get(f"{app_url}/items/{i}")
    get(f"{app_url}/no/such/path")
    get(f"{app_url}/upstream")
    assert get(f"{app_url}/stream?delay={FIRST_CHUNK}").startswith(b"chunk 0")
    ws_url = app_url.replace("http://", "ws://") + f"/ws?delay={WS_FIRST}"
    assert asyncio.run(_ws(ws_url)) == ["event 0", "event 1", "event 2"]
    get(f"{app_url}/items/9", headers={"X-Request-Start": f"t={time.time() - 0.5:.3f}"})
    time.sleep(0.1)
    found = samples(get(f"{app_url}/metrics").decode())

    items = "GET /items/{item_id}"
    count, _ = _histogram(found, "corevo_task_total_seconds", kind=items, outcome="completed")
    assert count == 5, "every request of a route is one kind, whatever the id"
    assert _histogram(found, "corevo_task_total_seconds", kind="unmatched")[0] == 1
    kinds = {dict(ls).get("kind") for (n, ls) in found if n.startswith("corevo_task_")}
    assert not any(k and "/metrics" in k for k in kinds), "the metrics route is excluded"
    assert not any(k and k.endswith("/1") for k in kinds), "never a raw path as a kind"

    count, total = _histogram(found, "corevo_task_external_seconds",
                              kind="GET /upstream", dependency="upstream")
    # the first call also opens the connection: on a loaded 2-core box that took 60-180 ms
    assert count == 1 and UPSTREAM_LATENCY <= total < UPSTREAM_LATENCY + 0.2, total

    count, first = _histogram(found, "corevo_task_first_event_seconds", kind="GET /stream")
    assert count == 1
    assert abs(first - FIRST_CHUNK) <= TOLERANCE, f"stream first event {first:.4f}s"
    count, first = _histogram(found, "corevo_task_first_event_seconds", kind="WS /ws")
    assert count == 1
    assert abs(first - WS_FIRST) <= TOLERANCE, f"websocket first event {first:.4f}s"
    assert _histogram(found, "corevo_task_total_seconds", kind="WS /ws",
                      outcome="completed")[0] == 1

    # dispatch: the proxy's stamp 0.5 s ago counts; other requests start at receive
    count, dispatch = _histogram(found, "corevo_task_dispatch_seconds", kind=items)
    assert count == 5 and 0.5 <= dispatch < 0.6
    errors = value(found, "corevo_task_mark_errors_total")
    assert errors == 0, "no mark after the end, twice or out of order"
