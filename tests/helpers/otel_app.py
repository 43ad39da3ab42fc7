"""The OTel system test's app, one per gunicorn worker (imported after the fork).

Each worker configures its own SDK: a tracer provider (so each request's stage span and
the stall's span are real, sampled spans), and a meter provider with two readers: OTLP
over HTTP to ``$OTLP_ENDPOINT`` every ``$OTLP_INTERVAL_MS``, and the Prometheus reader
served on a port of its own, announced as a file_sd target in ``$TARGETS_DIR``.
``GET /hit`` claims a job (the observer's counters) and answers; ``GET /stall`` blocks the
loop 0.5 s inside a span and answers with that span's trace id.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry, start_http_server

from corevo_obs import MetricsObserver, install_loop_health
from corevo_obs.integrations.asgi import StagesMiddleware
from corevo_obs.otel import (
    CountedExporter,
    ExemplarPrometheusReader,
    instrument_metrics,
    worker_resource,
)

STALL = 0.5

trace.set_tracer_provider(TracerProvider(resource=worker_resource("otel-test")))
TRACER = trace.get_tracer("otel-test")
_scrape = CollectorRegistry()
provider = MeterProvider(
    [PeriodicExportingMetricReader(
        CountedExporter(OTLPMetricExporter(endpoint=os.environ["OTLP_ENDPOINT"])),
        export_interval_millis=int(os.environ.get("OTLP_INTERVAL_MS", "500"))),
     ExemplarPrometheusReader(registry=_scrape)],
    resource=worker_resource("otel-test"))
instrument_metrics(meter_provider=provider)
_server, _ = start_http_server(0, addr="127.0.0.1", registry=_scrape)
_target = Path(os.environ["TARGETS_DIR"]) / f"{os.getpid()}.json"
_target.write_text(json.dumps([{"targets": [f"127.0.0.1:{_server.server_port}"]}]))


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    health = install_loop_health(project_roots=[os.path.dirname(__file__)])
    app.state.observer = MetricsObserver()
    yield
    await health.aclose()


app = FastAPI(lifespan=lifespan)
app.add_middleware(StagesMiddleware)


@app.get("/hit")
async def hit() -> dict[str, object]:
    app.state.observer.claim("won", queue_wait=0.01)
    return {"pid": os.getpid()}


@app.get("/stall")
async def stall() -> dict[str, object]:
    with TRACER.start_as_current_span("stall") as span:
        time.sleep(STALL)  # noqa: ASYNC251 - the stall under test, on the loop
        trace_id = f"{span.get_span_context().trace_id:032x}"
    return {"pid": os.getpid(), "trace_id": trace_id}
