"""The catalog as OpenTelemetry instruments, and the children the instrumentation writes.

One instrument per catalog name, built from its ``MetricSpec``: the same name (so an OTel
Prometheus exporter or a Collector's Prometheus exporter serves what the shipped
dashboards query), its help as the description, its unit read off the name, its bucket
bounds as the histogram's advisory boundaries, its labels as attributes. A child binds
one attribute set once, like a prometheus child; the OTel API has no bound instruments,
so each write passes the same attribute mapping.

Every write is guarded: an SDK that raises is counted under ``otel-metrics`` and logged
once (``core.guard``), and the host's call returns normally.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.context import Context

from ..core import guard
from ..core.catalog import MetricSpec

__all__ = ["Instruments", "unit_of"]

COMPONENT: Final = "otel-metrics"
_busy = threading.local()  # a failure counted while counting a failure: not again


def unit_of(s: MetricSpec) -> str:
    """UCUM unit of a catalog series: seconds by its name, else dimensionless."""
    base = s.name.removesuffix("_total")
    return "s" if base.endswith("_seconds") else "1"


def _failed(worker: str, exc: Exception) -> None:
    if getattr(_busy, "on", False):
        return
    _busy.on = True
    try:
        guard.absorb(COMPONENT, exc, worker=worker)
    finally:
        _busy.on = False


_cached: tuple[object, Context | None] = (None, None)


def _context(exemplar: Mapping[str, str] | None) -> Context | None:
    """The trace context an exemplar dict names ({trace_id, span_id} in hex), so the SDK's
    exemplar reservoir links the point to that span; the last one is kept (a task's four
    stages pass the same dict)."""
    global _cached
    cached = _cached
    if cached[0] is exemplar:
        return cached[1]
    ctx: Context | None = None
    if exemplar is not None:
        span_context = trace.SpanContext(
            int(exemplar["trace_id"], 16), int(exemplar["span_id"], 16), is_remote=False,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))
        ctx = trace.set_span_in_context(trace.NonRecordingSpan(span_context))
    _cached = (exemplar, ctx)
    return ctx


class OtelCounter:
    """A counter child: ``inc`` adds to the OTel counter under the bound attributes. Bound
    means exported at 0, as a bound prometheus child is (a rule's ``increase()`` then
    sees the first event as a rise)."""

    __slots__ = ("_add", "_attrs", "_worker")

    def __init__(self, instrument: Any, attrs: dict[str, str]) -> None:
        self._add, self._attrs = instrument.add, attrs
        self._worker = attrs.get("worker", "unknown")
        self.inc(0)

    def inc(self, amount: float = 1, exemplar: Mapping[str, str] | None = None) -> None:
        try:
            self._add(amount, self._attrs, _context(exemplar) if exemplar else None)
        except Exception as exc:  # noqa: BLE001 - never break the host
            _failed(self._worker, exc)


class OtelGauge:
    """A gauge child: the value is kept here (``inc``/``dec`` need it; the OTel gauge
    only sets) and each change is recorded."""

    __slots__ = ("_set", "_attrs", "_worker", "_value", "_lock")

    def __init__(self, instrument: Any, attrs: dict[str, str]) -> None:
        self._set, self._attrs = instrument.set, attrs
        self._worker = attrs.get("worker", "unknown")
        self._value = 0.0
        self._lock = threading.Lock()

    def _record(self, value: float) -> None:
        try:
            self._set(value, self._attrs)
        except Exception as exc:  # noqa: BLE001
            _failed(self._worker, exc)

    def set(self, value: float) -> None:
        self._value = float(value)
        self._record(self._value)

    def inc(self, amount: float = 1) -> None:
        with self._lock:
            self._value += amount
            value = self._value
        self._record(value)

    def dec(self, amount: float = 1) -> None:
        self.inc(-amount)

    def set_to_current_time(self) -> None:
        self.set(time.time())


class OtelHistogram:
    """A histogram child; an exemplar dict becomes the point's trace context."""

    __slots__ = ("_record", "_attrs", "_worker")

    def __init__(self, instrument: Any, attrs: dict[str, str]) -> None:
        self._record, self._attrs = instrument.record, attrs
        self._worker = attrs.get("worker", "unknown")

    def observe(self, amount: float, exemplar: Mapping[str, str] | None = None) -> None:
        try:
            self._record(amount, self._attrs, _context(exemplar) if exemplar else None)
        except Exception as exc:  # noqa: BLE001
            _failed(self._worker, exc)


_CHILD: Final[Mapping[str, Callable[[Any, dict[str, str]], Any]]] = {
    "counter": OtelCounter, "gauge": OtelGauge, "histogram": OtelHistogram}


class Instruments:
    """The meter's instruments, one per catalog name, made at the first bind."""

    def __init__(self, meter: Any) -> None:
        self._meter = meter
        self._made: dict[str, Any] = {}
        self._lock = threading.Lock()

    def instrument(self, s: MetricSpec, bounds: tuple[float, ...] | None) -> Any:
        found = self._made.get(s.name)
        if found is None:
            with self._lock:
                found = self._made.get(s.name)
                if found is None:
                    found = self._made[s.name] = self._make(s, bounds)
        return found

    def _make(self, s: MetricSpec, bounds: tuple[float, ...] | None) -> Any:
        unit = unit_of(s)
        if s.kind == "counter":
            return self._meter.create_counter(s.name, unit=unit, description=s.help)
        if s.kind == "gauge":
            return self._meter.create_gauge(s.name, unit=unit, description=s.help)
        return self._meter.create_histogram(
            s.name, unit=unit, description=s.help,
            explicit_bucket_boundaries_advisory=list(bounds or s.buckets or ()))

    def child(self, s: MetricSpec, labels: Mapping[str, str],
              bounds: tuple[float, ...] | None) -> Any:
        """A child bound to ``labels`` (the catalog's labels become attributes)."""
        return _CHILD[s.kind](self.instrument(s, bounds), dict(labels))
