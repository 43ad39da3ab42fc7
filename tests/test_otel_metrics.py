"""The OTel metrics path in one process: the catalog as instruments, the same values as the
prometheus path, exemplars carrying the task's trace, OTel-only mode, failures counted.

Real SDK parts (MeterProvider, InMemoryMetricReader, TracerProvider, the OTLP exporter
against a closed port); the gunicorn/OTLP/Prometheus run is tests/test_otel_system.py.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from corevo_obs import install_loop_health
from corevo_obs.core import guard
from corevo_obs.core.catalog import CATALOG, specs
from corevo_obs.core.errors import ConfigError
from corevo_obs.core.metrics import child, zero_counters
from corevo_obs.observer import MetricsObserver
from corevo_obs.otel import CountedExporter, instrument_metrics, unit_of, worker_resource
from corevo_obs.stages import StageRecorder


@pytest.fixture
def reader() -> Iterator[InMemoryMetricReader]:
    found = InMemoryMetricReader()
    provider = MeterProvider([found], resource=worker_resource("svc", worker="w0"))
    with instrument_metrics(meter_provider=provider):
        yield found
    provider.shutdown()


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    found: dict[str, list[Any]] = {}
    for rm in data.resource_metrics if data else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                found.setdefault(m.name, []).extend(m.data.data_points)
    return found


def test_every_catalog_series_binds_with_its_name_unit_and_buckets(reader, registry) -> None:
    for s in specs():
        labels = {label: (s.values.get(label) or ("x",))[0] for label in s.labels}
        c = child(s.name, registry, **labels)
        if s.kind == "histogram":
            c.observe(0.3)
        elif s.kind == "gauge":
            c.set(2)
        else:
            c.inc(2)
    data = reader.get_metrics_data()
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics
               for m in sm.metrics}
    assert set(metrics) == set(CATALOG)
    for name, m in metrics.items():
        s = CATALOG[name]
        assert m.unit == unit_of(s) and m.description == s.help
        (point,) = m.data.data_points
        assert set(point.attributes) == set(s.labels)
        if s.kind == "histogram":
            assert tuple(point.explicit_bounds) == s.buckets and point.count == 1
        else:
            assert point.value == 2
    assert unit_of(CATALOG["corevo_event_loop_busy_seconds_total"]) == "s"
    assert unit_of(CATALOG["corevo_lease_held"]) == "1"


def test_stage_counts_match_prometheus_and_carry_the_trace(reader, registry) -> None:
    tracer_provider = TracerProvider()
    rec = StageRecorder(worker="w0", registry=registry, tracer_provider=tracer_provider)

    async def turn() -> None:
        t = rec.task("chat")
        t.started()
        async with t.external("model"):
            await asyncio.sleep(0)
        t.first_event()
        t.finish()

    async def main() -> None:
        for _ in range(7):
            await turn()

    asyncio.run(main())
    got = points(reader)
    for name in ("corevo_task_dispatch_seconds", "corevo_task_first_event_seconds",
                 "corevo_task_external_seconds", "corevo_task_total_seconds"):
        (point,) = got[name]
        prom = registry.get_sample_value(f"{name}_count", dict(point.attributes))
        assert point.count == prom == 7, name
        assert point.exemplars, name  # the sampled span's ids (SDK trace_based filter)
        assert all(len(f"{e.trace_id:032x}") == 32 and e.trace_id for e in point.exemplars)


def test_observer_and_zeroed_counters_reach_the_meter(reader, registry) -> None:
    obs = MetricsObserver(worker="w0", registry=registry)
    obs.lease_acquired("llm", "granted", held=3, limit=10, seconds=0.002)
    obs.lease_released("llm", "released", held_seconds=0.5)
    zero_counters("watchdog", registry, worker="w0")
    got = points(reader)
    granted = [p.value for p in got["corevo_lease_acquire_total"]
               if p.attributes["outcome"] == "granted"]
    assert granted == [1]
    assert {p.attributes["outcome"]: p.value for p in got["corevo_lease_acquire_total"]} == {
        "granted": 1, "rejected": 0, "fenced": 0, "error": 0}
    assert [p.value for p in got["corevo_lease_held"]] == [3]
    assert [p.value for p in got["corevo_event_loop_stalls_total"]] == [0]
    assert sorted(p.attributes["cause"] for p in got["corevo_event_loop_stalls_by_cause_total"]
                  ) == sorted(CATALOG["corevo_event_loop_stalls_by_cause_total"].values["cause"])


def test_otel_only_writes_no_prometheus_value() -> None:
    registry = CollectorRegistry()
    reader = InMemoryMetricReader()
    with instrument_metrics(meter_provider=MeterProvider([reader]), prometheus=False):
        child("corevo_event_loop_stalls_total", registry, worker="w0").inc(3)
    assert registry.get_sample_value("corevo_event_loop_stalls_total", {"worker": "w0"}) is None
    assert [p.value for p in points(reader)["corevo_event_loop_stalls_total"]] == [3]


def test_no_provider_and_a_second_install_are_clear_errors() -> None:
    with pytest.raises(ConfigError, match="no MeterProvider is configured"):
        instrument_metrics()
    with instrument_metrics(meter_provider=MeterProvider()):
        with pytest.raises(ConfigError, match="on already"):
            instrument_metrics(meter_provider=MeterProvider())


def test_resource_names_the_worker_process() -> None:
    attrs = worker_resource("svc", worker="w3").attributes
    assert attrs["service.name"] == "svc" and attrs["corevo.worker"] == "w3"
    assert attrs["service.instance.id"] == f"w3-{attrs['process.pid']!s}"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_failing_exporter_is_counted_and_logged_once(registry, caplog) -> None:
    guard.reset_for_tests()
    url = f"http://127.0.0.1:{_closed_port()}/v1/metrics"
    exporter = CountedExporter(OTLPMetricExporter(endpoint=url, timeout=0.5),
                               worker="w0", registry=registry)
    reader = PeriodicExportingMetricReader(exporter, export_interval_millis=10**6)
    provider = MeterProvider([reader])
    with caplog.at_level(logging.DEBUG, logger="corevo_obs"):
        with instrument_metrics(meter_provider=provider):
            child("corevo_event_loop_stalls_total", registry, worker="w0").inc()
            for _ in range(2):  # each export fails; none raises into the caller
                provider.force_flush(5_000)
    provider.shutdown()
    failed = registry.get_sample_value("corevo_instrumentation_errors_total",
                                       {"worker": "w0", "component": "otel-export"})
    assert failed is not None and failed >= 2
    warnings = [r for r in caplog.records if r.name == "corevo_obs"
                and r.levelno == logging.WARNING and "otel-export" in r.getMessage()]
    assert len(warnings) == 1


@pytest.mark.system  # a real stall on a real loop (seconds, timing): the system tier
def test_a_stalls_point_carries_the_trace_of_the_task_that_held_the_loop(reader) -> None:
    tracer = TracerProvider().get_tracer("test")

    async def request() -> str:
        with tracer.start_as_current_span("GET /slow") as span:
            time.sleep(0.3)  # noqa: ASYNC251 - the stall under test
            return trace.format_trace_id(span.get_span_context().trace_id)

    async def main() -> str:
        async with install_loop_health(worker="w0", registry=CollectorRegistry(),
                                       stall_threshold=0.1):
            await asyncio.sleep(0.1)
            trace_id = await asyncio.get_running_loop().create_task(request())
            await asyncio.sleep(0.3)  # the watchdog reports once beats come back
        return trace_id

    trace_id = asyncio.run(main())
    (point,) = points(reader)["corevo_event_loop_stall_seconds"]
    assert point.count == 1
    assert [f"{e.trace_id:032x}" for e in point.exemplars] == [trace_id]
    assert point.exemplars[0].value >= 0.25


def test_the_package_imports_no_opentelemetry_until_a_name_is_used() -> None:
    probe = ("import sys, corevo_obs.otel, corevo_obs.stages, corevo_obs.loop; "
             "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]", out.stdout
