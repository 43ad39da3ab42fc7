"""The alert matrix's web service: a FastAPI app instrumented as docs/get-started.md
shows (loop health in the lifespan, ``StagesMiddleware``), run by gunicorn with
UvicornWorker and the corevo hooks (the master serves every worker's series).

``POST /jobs`` queues a job for the pool in PostgreSQL (a 500 while the database is
down, as a real app would answer, after the pool's ``DB_TIMEOUT``). The ``/fault``
routes plant a blocking call on one named worker only (gunicorn hands a request to any
worker; the test retries until the worker it wants takes one): ``/fault/stall`` a short
``time.sleep``, ``/fault/freeze`` a long one, past gunicorn's ``--timeout``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from corevo_obs import install_loop_health
from corevo_obs.claims import AsyncPostgresJobStore
from corevo_obs.core.identity import worker_name
from corevo_obs.integrations.asgi import StagesMiddleware

from .matrix_pool import DB_TIMEOUT

TABLE = "corevo_matrix_jobs"  # the pool's table (tests/helpers/matrix_pool.py)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    health = install_loop_health()
    app.state.jobs = AsyncPostgresJobStore(os.environ["MATRIX_PG_DSN"], table=TABLE,
                                           connect_timeout=2,
                                           statement_timeout=2, pool_timeout=DB_TIMEOUT)
    yield
    await app.state.jobs.aclose()
    await health.aclose()


app = FastAPI(lifespan=lifespan)
app.add_middleware(StagesMiddleware)


@app.get("/items/{item_id}")
async def item(item_id: int) -> dict[str, int]:
    return {"item": item_id}


@app.post("/jobs", status_code=202)
async def submit(work: float = 0.2) -> dict[str, str]:
    return {"job": await app.state.jobs.create_job(payload=json.dumps({"work": work}))}


def _planted(worker: str, seconds: float) -> dict[str, object]:
    me = worker_name()
    if me == worker:
        time.sleep(seconds)  # the planted bug: a blocking call on the loop
    return {"worker": me, "hit": me == worker}


@app.get("/fault/stall")
async def stall(worker: str, seconds: float = 0.5) -> dict[str, object]:
    return _planted(worker, seconds)


@app.get("/fault/freeze")
async def freeze(worker: str, seconds: float = 45.0) -> dict[str, object]:
    return _planted(worker, seconds)
