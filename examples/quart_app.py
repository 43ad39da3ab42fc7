"""A Quart service instrumented by corevo-obs: route templates with no user option.

Run it (single process, metrics at /metrics)::

    hypercorn examples.quart_app:app          # or: uvicorn examples.quart_app:app

``StagesMiddleware`` wraps Quart's ASGI app (Quart's own way to add ASGI middleware) and
matches each request on the app's ``url_map`` as Quart will (``GET /items/<int:item_id>``).
"""

from __future__ import annotations

import asyncio
import os

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from quart import Quart, Response, websocket

from corevo_obs import LoopHealth, install_loop_health
from corevo_obs.exposition import exposition_registry
from corevo_obs.integrations.asgi import StagesMiddleware

app = Quart(__name__)
app.asgi_app = StagesMiddleware(app.asgi_app)  # type: ignore[method-assign,assignment]
_health: list[LoopHealth] = []


@app.before_serving
async def start_loop_health() -> None:
    _health.append(install_loop_health(project_roots=[os.path.dirname(__file__)]))


@app.after_serving
async def stop_loop_health() -> None:
    for health in _health:
        await health.aclose()


@app.get("/items/<int:item_id>")
async def item(item_id: int) -> dict[str, int]:
    return {"item": item_id}


@app.websocket("/ws")
async def events() -> None:
    await websocket.accept()
    await asyncio.sleep(0.05)
    for i in range(3):
        await websocket.send(f"event {i}")


@app.get("/metrics")
async def metrics() -> Response:
    return Response(generate_latest(exposition_registry()), content_type=CONTENT_TYPE_LATEST)
