"""An exporter wrapper that counts failed exports instead of leaving them to the SDK log.

The SDK's periodic reader exports from its own thread and logs a failure at every
interval; the host's dashboards see nothing. ``CountedExporter`` wraps any
``MetricExporter`` (OTLP, console...) and counts each failed or raising export in
``corevo_instrumentation_errors_total{component="otel-export"}``, logged once.
"""

from __future__ import annotations

from typing import Any, Final

from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
)
from prometheus_client import CollectorRegistry

from ..core import guard
from ..core.errors import CorevoObsError
from ..core.telemetry import HasTelemetry, Telemetry

__all__ = ["COMPONENT", "CountedExporter", "ExportFailed"]

COMPONENT: Final = "otel-export"


class ExportFailed(CorevoObsError):
    """The wrapped exporter reported a failed export (its own log says why)."""


class CountedExporter(HasTelemetry, MetricExporter):
    """``exporter`` with its failures counted (a real ``MetricExporter``: pass it to
    ``PeriodicExportingMetricReader`` as you would the one it wraps); ``worker`` and
    ``registry`` are those of the failure counter."""

    def __init__(self, exporter: MetricExporter, *, worker: str | None = None,
                 registry: CollectorRegistry | None = None) -> None:
        super().__init__(preferred_temporality=exporter._preferred_temporality,
                         preferred_aggregation=exporter._preferred_aggregation)
        self.exporter = exporter
        self._telemetry = Telemetry.resolve_on_use(COMPONENT, worker, registry)

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000,
               **kwargs: Any) -> MetricExportResult:
        try:
            result = self.exporter.export(metrics_data, timeout_millis=timeout_millis,
                                          **kwargs)
        except Exception as exc:  # noqa: BLE001 - the reader's thread must go on
            guard.absorb(COMPONENT, exc, telemetry=self._telemetry)
            return MetricExportResult.FAILURE
        if result is not MetricExportResult.SUCCESS:
            guard.absorb(COMPONENT, ExportFailed(f"{type(self.exporter).__name__} "
                                                 "reported a failed export"),
                         telemetry=self._telemetry)
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.exporter.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.exporter.shutdown(timeout_millis=timeout_millis, **kwargs)
