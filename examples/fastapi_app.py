"""A FastAPI service instrumented by corevo-obs with no per-handler code.

Run it (single process, metrics at /metrics)::

    uvicorn examples.fastapi_app:app

under gunicorn with the hooks in ``examples/gunicorn_conf.py`` (the master serves every
worker's metrics on one port), or ``uvicorn --workers N`` with
``$PROMETHEUS_MULTIPROC_DIR`` set and ``corevo-obs metrics serve DIR`` beside it (each
worker takes a reusable slot name ``w0``..``wN-1``). The upstream it calls
is ``$UPSTREAM_URL`` (default: a local fixed-latency server the tests start).
``$EXAMPLE_BLOCKING=1`` plants a blocking ``time.sleep`` in ``GET /report``: the stall
watchdog names that line.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import StreamingResponse
from prometheus_client import make_asgi_app

from corevo_obs import enable_multiprocess, install_loop_health
from corevo_obs.exposition import exposition_registry
from corevo_obs.integrations.asgi import StagesMiddleware
from corevo_obs.integrations.http_clients import httpx_async_hooks
from corevo_obs.integrations.worker_slots import claim_worker_slot

UPSTREAM = os.environ.get("UPSTREAM_URL", "http://127.0.0.1:9/")

if os.environ.get("PROMETHEUS_MULTIPROC_DIR") and not os.environ.get("COREVO_WORKER"):
    # uvicorn --workers gives no hook to name workers: take a slot (gunicorn's post_fork
    # hook has already named this worker and enabled multiprocess mode)
    claim_worker_slot()
    enable_multiprocess()


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    health = install_loop_health(project_roots=[os.path.dirname(__file__)])
    app.state.upstream = httpx.AsyncClient(event_hooks=httpx_async_hooks(dependency="upstream"))
    yield
    await app.state.upstream.aclose()
    await health.stop()


app = FastAPI(lifespan=lifespan)
app.add_middleware(StagesMiddleware)
if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    app.mount("/metrics", make_asgi_app(registry=exposition_registry()))


@app.get("/items/{item_id}")
async def item(item_id: int) -> dict[str, int]:
    return {"item": item_id}


@app.get("/upstream")
async def upstream() -> dict[str, int]:
    reply = await app.state.upstream.get(UPSTREAM)
    return {"status": reply.status_code}


@app.get("/report")
async def report() -> dict[str, str]:
    if os.environ.get("EXAMPLE_BLOCKING") == "1":
        time.sleep(0.4)  # noqa: ASYNC251 - the planted bug: a blocking call on the loop
    return {"report": "ok"}


@app.get("/stream")
async def stream(delay: float = 0.2, chunks: int = 3) -> StreamingResponse:
    async def body() -> AsyncIterator[bytes]:
        await asyncio.sleep(delay)
        for i in range(chunks):
            yield f"chunk {i}\n".encode()
            await asyncio.sleep(0.01)

    return StreamingResponse(body(), media_type="text/plain")


@app.websocket("/ws")
async def events(ws: WebSocket, delay: float = 0.15) -> None:
    await ws.accept()
    await asyncio.sleep(delay)
    for i in range(3):
        await ws.send_text(f"event {i}")
    await ws.close()


@app.post("/upload")
async def upload(request: Request) -> dict[str, int]:
    size = 0
    async for chunk in request.stream():  # a long upload, read as it arrives
        size += len(chunk)
    return {"bytes": size}


_jobs: set[asyncio.Task[None]] = set()


async def _job() -> None:
    await asyncio.sleep(0.2)
    await app.state.upstream.get(UPSTREAM)


@app.post("/jobs", status_code=202)
async def start_job() -> dict[str, int]:
    """A background job: the response goes out at once, the job calls the upstream later."""
    task = asyncio.create_task(_job())
    _jobs.add(task)
    task.add_done_callback(_jobs.discard)
    return {"running": len(_jobs)}
