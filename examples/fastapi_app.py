"""A FastAPI service instrumented by corevo-obs with no per-handler code.

Run it (single process, metrics at /metrics)::

    uvicorn examples.fastapi_app:app

under gunicorn with the hooks in ``examples/gunicorn_conf.py`` (the master serves every
worker's metrics on one port), or ``uvicorn --workers N`` with
``$PROMETHEUS_MULTIPROC_DIR`` set and ``corevo-obs metrics serve DIR`` beside it (each
worker takes a reusable slot name ``w0``..``wN-1``). The upstream it calls
is ``$UPSTREAM_URL`` (default: a local fixed-latency server the tests start).
``$EXAMPLE_BLOCKING=1`` plants a blocking ``time.sleep`` in ``GET /report`` (0.4 s) and
in ``GET /freeze`` (``$EXAMPLE_FREEZE_SECONDS``, default 45: past gunicorn's timeout):
the stall watchdog names those lines, the second one while the loop is still frozen.

The last routes are the design's validation workload (``corevo-obs loadtest``,
docs/loadtest.md): ``GET /sdk`` runs a sync SDK call through a bounded
``OffloadAdapter``; ``POST /jobs`` and ``GET /jobs/stream`` run claimed jobs with events,
cancels and gated side effects (``examples/jobs_runtime.py``).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
from fastapi import FastAPI, Request, WebSocket
from fastapi.responses import JSONResponse, StreamingResponse
from prometheus_client import make_asgi_app

from corevo_obs import OffloadAdapter, enable_multiprocess, install_loop_health
from corevo_obs.exposition import exposition_registry
from corevo_obs.integrations.asgi import StagesMiddleware
from corevo_obs.integrations.http_clients import httpx_async_hooks
from corevo_obs.integrations.worker_slots import claim_worker_slot
from corevo_obs.offload import OffloadRejected

from .jobs_runtime import JobRuntime, jobs_configured

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
    # a sync SDK gets 2 threads; 32 more callers may queue for them, none longer than 5 s
    app.state.sdk = OffloadAdapter(name="sdk", max_in_flight=2, max_waiting=32, wait_timeout=5)
    # a run that names the job database (the load test) claims jobs from the start; any
    # other server opens the job runtime at its first job request, or never
    app.state.jobs_lock = asyncio.Lock()
    app.state.jobs = (await JobRuntime.open(app.state.upstream, UPSTREAM)
                      if jobs_configured() else None)
    yield
    if app.state.jobs is not None:
        await app.state.jobs.aclose()
    await app.state.sdk.aclose()
    await app.state.upstream.aclose()
    await health.aclose()


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


@app.get("/freeze")
async def freeze() -> dict[str, str]:
    """The long freeze (a sync call that hangs): past gunicorn's timeout by default."""
    if os.environ.get("EXAMPLE_BLOCKING") == "1":
        seconds = float(os.environ.get("EXAMPLE_FREEZE_SECONDS", "45"))
        time.sleep(seconds)  # noqa: ASYNC251 - the planted bug: the loop frozen for long
    return {"freeze": "over"}


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


def _sdk_call(n: int) -> int:
    time.sleep(0.08)  # a vendor SDK with no async API: fine in a thread, never on the loop
    return n


@app.get("/sdk")
async def sdk(n: int = 0) -> JSONResponse:
    try:
        return JSONResponse({"sdk": await app.state.sdk.run(_sdk_call, n)})
    except OffloadRejected as exc:  # the bound held: say so instead of queueing forever
        return JSONResponse({"rejected": exc.reason}, status_code=503)


async def _jobs() -> JobRuntime:
    async with app.state.jobs_lock:
        if app.state.jobs is None:
            app.state.jobs = await JobRuntime.open(app.state.upstream, UPSTREAM)
        return app.state.jobs  # type: ignore[no-any-return]


@app.post("/jobs", status_code=202)
async def start_job(steps: int = 3, step: float = 0.1) -> dict[str, str]:
    """A background job: queued at once, claimed and run by whichever worker is free."""
    return {"job": await (await _jobs()).submit(steps, step)}


@app.get("/jobs/stream")
async def job_stream(steps: int = 3, step: float = 0.1) -> StreamingResponse:
    """A job run here whose events stream back; a client that goes away cancels it."""
    jobs = await _jobs()
    job, events = await jobs.stream(steps, step)

    async def body() -> AsyncIterator[bytes]:
        finished = False
        try:
            async for event in events:
                yield json.dumps(event.as_dict()).encode() + b"\n"
            finished = True
        finally:
            if not finished:
                jobs.cancel_soon(job)

    return StreamingResponse(body(), media_type="application/x-ndjson")
