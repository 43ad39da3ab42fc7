"""A stall report names the asyncio task that held the loop, and its trace when one is on.

Real loops (asyncio and uvloop), a real OpenTelemetry SDK tracer, real blocking calls;
the no-OpenTelemetry case runs in a fresh interpreter that never imported it.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
import uvloop
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from corevo_obs import install_loop_health
from corevo_obs.loop.watchdog import StallReport

pytestmark = pytest.mark.system

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}
TRACER = TracerProvider().get_tracer("test")  # not the global provider: none is set


async def handle_request(seconds: float) -> str:
    with TRACER.start_as_current_span("GET /slow") as span:
        time.sleep(seconds)  # noqa: ASYNC251 - the blocking call the report leads to
        return trace.format_trace_id(span.get_span_context().trace_id)


def _stalls(kind: str, body: Callable[[], object]) -> tuple[list[StallReport], object]:
    async def main() -> tuple[list[StallReport], object]:
        async with install_loop_health(worker="w0", registry=CollectorRegistry(),
                                       stall_threshold=0.1) as health:
            await asyncio.sleep(0.1)
            result = body()
            if asyncio.isfuture(result):
                result = await result
            await asyncio.sleep(0.2)  # the watchdog reports once beats come back
        return health.reports, result

    loop = LOOPS[kind]()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


@pytest.mark.parametrize("kind", LOOPS)
def test_stall_names_the_task_its_coroutine_and_its_trace(kind):
    reports, trace_id = _stalls(kind, lambda: asyncio.get_running_loop().create_task(
        handle_request(0.4), name="request-7"))
    assert len(reports) == 1, reports
    held = reports[0].task
    assert held is not None
    assert (held.name, held.coroutine) == ("request-7", "handle_request")
    assert held.trace_id == trace_id and len(trace_id) == 32
    assert held.span_id is not None and len(held.span_id) == 16
    assert f"held by task 'request-7' running handle_request, trace {trace_id}" in (
        reports[0].format())
    assert json.loads(reports[0].log_line("json"))["task"]["trace_id"] == trace_id


def test_a_task_without_a_span_is_named_without_a_trace_and_names_are_bounded():
    async def untraced() -> None:
        time.sleep(0.3)  # noqa: ASYNC251 - the stall

    long_name = "x" * 500
    reports, _ = _stalls("asyncio", lambda: asyncio.get_running_loop().create_task(
        untraced(), name=long_name))
    held = reports[0].task
    assert held is not None and held.trace_id is None and held.span_id is None
    assert held.coroutine.endswith("untraced") and len(held.name) == 120


def test_a_plain_callback_stall_names_no_task():
    reports, _ = _stalls("asyncio", lambda: asyncio.get_running_loop().call_soon(
        time.sleep, 0.3))
    assert len(reports) == 1 and reports[0].captured
    assert reports[0].task is None
    assert "held by" not in reports[0].format()


NO_OTEL = """
import asyncio, sys, time
from prometheus_client import CollectorRegistry
from corevo_obs import install_loop_health

async def handler():
    time.sleep(0.3)

async def main():
    async with install_loop_health(worker="w0", registry=CollectorRegistry(),
                                   stall_threshold=0.1) as health:
        await asyncio.sleep(0.1)
        await asyncio.create_task(handler(), name="req")
        await asyncio.sleep(0.2)
    (report,) = health.reports
    print(report.task.name, report.task.coroutine, report.task.trace_id,
          sorted(m for m in sys.modules if m.startswith("opentelemetry")))

asyncio.run(main())
"""


def test_without_opentelemetry_imported_nothing_of_it_is_imported():
    out = subprocess.run([sys.executable, "-c", NO_OTEL], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.split("\n")[0] == "req handler None []"
