"""OpenTelemetry metrics: the catalog's series through a host's ``MeterProvider``.

Opt-in (the ``otel`` extra): names resolve on first use (PEP 562), so importing this
package loads no OpenTelemetry module, and with no ``instrument_metrics`` call no OTel
metrics API is touched. docs/otel.md is the user's page.

    from corevo_obs.otel import CountedExporter, instrument_metrics, worker_resource
    provider = MeterProvider([PeriodicExportingMetricReader(CountedExporter(
        OTLPMetricExporter()))], resource=worker_resource("checkout"))
    instrument_metrics(meter_provider=provider)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from ..core import lazy

if TYPE_CHECKING:
    from .export import CountedExporter, ExportFailed
    from .instruments import unit_of
    from .mirror import OtelMetrics, instrument_metrics
    from .prometheus_reader import ExemplarPrometheusReader
    from .resource import WORKER_ATTRIBUTE, worker_resource

__all__ = [
    "WORKER_ATTRIBUTE",
    "CountedExporter",
    "ExemplarPrometheusReader",
    "ExportFailed",
    "OtelMetrics",
    "instrument_metrics",
    "unit_of",
    "worker_resource",
]

_LAZY: Final = {"CountedExporter": "export", "ExportFailed": "export", "unit_of": "instruments",
                "OtelMetrics": "mirror", "instrument_metrics": "mirror",
                "ExemplarPrometheusReader": "prometheus_reader",
                "WORKER_ATTRIBUTE": "resource", "worker_resource": "resource"}


def __getattr__(name: str) -> Any:
    return lazy.attribute(__name__, _LAZY, globals(), name)


def __dir__() -> list[str]:
    return sorted(__all__)
