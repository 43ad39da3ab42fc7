"""A Litestar service instrumented by corevo-obs: route templates with no user option.

Run it (single process, metrics at /metrics)::

    uvicorn examples.litestar_app:app

``StagesMiddleware`` wraps the Litestar app and finds each request's template the way
Litestar's router does (``GET /items/{item_id}``); under gunicorn use the hooks in
``examples/gunicorn_conf.py`` exactly as for FastAPI.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from litestar import Litestar, Response, get, websocket
from litestar.connection import WebSocket
from litestar.params import FromPath
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from corevo_obs import install_loop_health
from corevo_obs.exposition import exposition_registry
from corevo_obs.integrations.asgi import StagesMiddleware


@asynccontextmanager
async def loop_health(app: Litestar) -> AsyncIterator[None]:
    health = install_loop_health(project_roots=[os.path.dirname(__file__)])
    yield
    await health.aclose()


@get("/items/{item_id:int}")
async def item(item_id: FromPath[int]) -> dict[str, int]:
    return {"item": item_id}


@websocket("/ws")
async def events(socket: WebSocket) -> None:  # type: ignore[type-arg]
    await socket.accept()
    await asyncio.sleep(0.05)
    for i in range(3):
        await socket.send_text(f"event {i}")
    await socket.close()


@get("/metrics", sync_to_thread=False)
def metrics() -> Response[bytes]:
    return Response(generate_latest(exposition_registry()), media_type=CONTENT_TYPE_LATEST)


app = StagesMiddleware(Litestar(route_handlers=[item, events, metrics], lifespan=[loop_health]))
