"""One small app per framework, instrumented the way users do it, for hostile-client tests.

    web_app.py asgi|aiohttp --port N [--static DIR]

Routes: ``GET /items/{item_id}``, ``/any`` (every method; aiohttp only), ``GET /stream``
(a 10 s stream of small chunks), ``GET /file`` (``FileResponse`` of ``DIR/page.txt``,
aiohttp), ``/static/...`` (``add_static(DIR)``, aiohttp), ``GET /metrics`` (the global
registry, excluded from the kinds). Logs go to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

CHUNKS, CHUNK_DELAY = 200, 0.05


def asgi_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response, StreamingResponse
    from starlette.routing import Route

    from corevo_obs.integrations.asgi import StagesMiddleware

    async def item(request: Request) -> JSONResponse:
        return JSONResponse({"item": request.path_params["item_id"]})

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(CHUNKS):
            yield f"chunk {i}\n".encode()
            await asyncio.sleep(CHUNK_DELAY)

    async def stream(request: Request) -> StreamingResponse:
        return StreamingResponse(chunks())

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    app = Starlette(routes=[Route("/items/{item_id}", item), Route("/stream", stream),
                            Route("/metrics", metrics)])
    app.add_middleware(StagesMiddleware)
    return app


def aiohttp_app(static: Path | None) -> Any:
    from aiohttp import web

    from corevo_obs.integrations.aiohttp_web import install_stages

    async def item(request: web.Request) -> web.Response:
        return web.json_response({"item": request.match_info["item_id"]})

    async def anything(request: web.Request) -> web.Response:
        return web.json_response({"method": request.method})

    async def stream(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        await resp.prepare(request)
        for i in range(CHUNKS):
            await resp.write(f"chunk {i}\n".encode())
            await asyncio.sleep(CHUNK_DELAY)
        return resp

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=generate_latest(REGISTRY),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    app = web.Application()
    install_stages(app)
    app.router.add_get("/items/{item_id}", item)
    app.router.add_route("*", "/any", anything)
    app.router.add_get("/stream", stream)
    app.router.add_get("/metrics", metrics)
    if static is not None:
        page = static / "page.txt"

        async def file(request: web.Request) -> web.FileResponse:
            return web.FileResponse(page)

        app.router.add_get("/file", file)
        app.router.add_static("/static", static)
    return app


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("framework", choices=("asgi", "aiohttp"))
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--static", type=Path)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO)
    if args.framework == "asgi":
        import uvicorn

        uvicorn.run(asgi_app(), host="127.0.0.1", port=args.port, log_level="info")
    else:
        from aiohttp import web

        web.run_app(aiohttp_app(args.static), host="127.0.0.1", port=args.port,
                    print=None)


if __name__ == "__main__":
    main()
