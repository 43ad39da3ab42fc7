"""Turn the OTel metrics path on or off for this process: ``instrument_metrics``.

It installs a ``core.metrics`` mirror, so every series bound from then on (loop lag,
heartbeat, stalls, utilization, the four stages, offload, leases, claims, events, cancel,
the suite's own errors) is recorded through the meter of ``meter_provider`` as well as,
or with ``prometheus=False`` instead of, the prometheus registry. Call it before the
instrumentation starts (a child bound earlier keeps writing where it was bound).
"""

from __future__ import annotations

import threading
from typing import Any, Final

from opentelemetry import metrics

from ..core import metrics as core_metrics
from ..core.catalog import MetricSpec
from ..core.errors import ConfigError
from .instruments import Instruments
from .tee import tee

__all__ = ["OtelMetrics", "instrument_metrics"]

METER_NAME: Final = "corevo_obs"
_lock = threading.Lock()


class OtelMetrics:
    """The installed OTel path (a ``core.metrics.Mirror``); ``close()`` takes it out.

    >>> from opentelemetry.sdk.metrics import MeterProvider
    >>> from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    >>> reader = InMemoryMetricReader()
    >>> with instrument_metrics(meter_provider=MeterProvider([reader])):
    ...     core_metrics.child("corevo_event_loop_stalls_total", worker="w0").inc()
    >>> names = [m.name for r in reader.get_metrics_data().resource_metrics
    ...          for s in r.scope_metrics for m in s.metrics]
    >>> print(*names)
    corevo_event_loop_stalls_total
    """

    def __init__(self, meter_provider: Any, *, prometheus: bool) -> None:
        self.meter_provider = meter_provider
        self.replaces = not prometheus
        self._instruments = Instruments(meter_provider.get_meter(METER_NAME))

    def __call__(self, s: MetricSpec, labels: dict[str, str],
                 bounds: tuple[float, ...] | None, prometheus: Any) -> Any:
        otel = self._instruments.child(s, labels, bounds)
        return otel if prometheus is None else tee(s.kind, prometheus, otel)

    def close(self) -> None:
        """Stop mirroring the series bound from now on (the provider stays the host's)."""
        with _lock:
            if core_metrics.current_mirror() is self:
                core_metrics.set_mirror(None)

    def __enter__(self) -> OtelMetrics:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def instrument_metrics(
    *,
    meter_provider: Any | None = None,
    prometheus: bool = True,
) -> OtelMetrics:
    """Record every catalog series through OpenTelemetry from now on.

    ``meter_provider``: the SDK provider the host configured (default: the global one;
    the API's no-op default is refused, since nothing would be exported).
    ``prometheus``: keep writing the prometheus registry too (True), or write OTel only
    (False: no multiprocess directory, no prometheus values on this process).
    """
    if meter_provider is None:
        meter_provider = metrics.get_meter_provider()
    if isinstance(meter_provider, metrics.NoOpMeterProvider) or (
            type(meter_provider).__name__ == "_ProxyMeterProvider"):
        raise ConfigError("no MeterProvider is configured: pass meter_provider= or call "
                          "opentelemetry.metrics.set_meter_provider() first",
                          source="instrument_metrics")
    installed = OtelMetrics(meter_provider, prometheus=prometheus)
    with _lock:
        if core_metrics.current_mirror() is not None:
            raise ConfigError("OTel metrics are on already: close() the first one",
                              source="instrument_metrics")
        core_metrics.set_mirror(installed)
    return installed
