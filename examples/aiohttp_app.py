"""An aiohttp.web service instrumented by corevo-obs with no per-handler code.

Run it: ``python -m examples.aiohttp_app --port 8080`` (metrics at /metrics).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from corevo_obs import install_loop_health
from corevo_obs.exposition import exposition_registry
from corevo_obs.integrations.aiohttp_web import install_stages
from corevo_obs.integrations.http_clients import aiohttp_trace_config

UPSTREAM = os.environ.get("UPSTREAM_URL", "http://127.0.0.1:9/")
SESSION = web.AppKey("session", aiohttp.ClientSession)


async def item(request: web.Request) -> web.Response:
    return web.json_response({"item": int(request.match_info["item_id"])})


async def upstream(request: web.Request) -> web.Response:
    async with request.app[SESSION].get(UPSTREAM) as reply:
        await reply.read()
        return web.json_response({"status": reply.status})


async def report(request: web.Request) -> web.Response:
    if os.environ.get("EXAMPLE_BLOCKING") == "1":
        time.sleep(0.4)  # noqa: ASYNC251 - the planted bug: a blocking call on the loop
    return web.json_response({"report": "ok"})


async def stream(request: web.Request) -> web.StreamResponse:
    delay = float(request.query.get("delay", "0.2"))
    resp = web.StreamResponse()
    await resp.prepare(request)
    await asyncio.sleep(delay)
    for i in range(3):
        await resp.write(f"chunk {i}\n".encode())
        await asyncio.sleep(0.01)
    return resp


async def events(request: web.Request) -> web.WebSocketResponse:
    delay = float(request.query.get("delay", "0.15"))
    ws = web.WebSocketResponse()
    await ws.prepare(request)
    await asyncio.sleep(delay)
    for i in range(3):
        await ws.send_str(f"event {i}")
    await ws.close()
    return ws


async def metrics(request: web.Request) -> web.Response:
    body = generate_latest(exposition_registry())
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def lifecycle(app: web.Application):  # type: ignore[no-untyped-def]
    health = install_loop_health(project_roots=[os.path.dirname(__file__)])
    app[SESSION] = aiohttp.ClientSession(
        trace_configs=[aiohttp_trace_config(dependency="upstream")])
    yield
    await app[SESSION].close()
    await health.aclose()


def make_app() -> web.Application:
    app = web.Application()
    install_stages(app)
    app.cleanup_ctx.append(lifecycle)
    app.router.add_get("/items/{item_id}", item)
    app.router.add_get("/upstream", upstream)
    app.router.add_get("/report", report)
    app.router.add_get("/stream", stream)
    app.router.add_get("/ws", events)
    app.router.add_get("/metrics", metrics)
    return app


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=8080)
    web.run_app(make_app(), host="127.0.0.1", port=parser.parse_args().port)
