"""The SDK's Prometheus reader, with the histograms' exemplars kept.

``opentelemetry-exporter-prometheus`` drops exemplars when it turns the SDK's points into
prometheus_client families, so a scrape of it cannot link a stage bucket or a stall to
its trace. ``ExemplarPrometheusReader`` is that reader with one step added: after the
translation, each histogram bucket sample whose range holds an exemplar of the same
attribute set gets it (``trace_id``, ``span_id``), which the OpenMetrics exposition
serves and a Prometheus with ``--enable-feature=exemplar-storage`` keeps.

The step wraps ``_CustomCollector._translate_to_prometheus`` (private; checked against
opentelemetry-exporter-prometheus 0.66b2 only): if a version lacks it, the reader works
as the plain one and says so once (``corevo_obs`` log, counted).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics.export import Histogram, MetricsData
from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.samples import Exemplar

from ..core import guard
from ..core.errors import CorevoObsError

__all__ = ["ExemplarPrometheusReader"]

COMPONENT: Final = "otel-prometheus-exemplars"
_Key = tuple[str, frozenset[tuple[str, str]]]


def _label(key: str) -> str:
    return "".join(c if c.isalnum() or c == "_" else "_" for c in key)


def _exemplars(data: MetricsData) -> dict[_Key, list[Exemplar]]:
    """(metric name, attributes as labels) -> its points' exemplars, as prometheus's."""
    found: dict[_Key, list[Exemplar]] = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if not isinstance(metric.data, Histogram):
                    continue
                for point in metric.data.data_points:
                    kept = [Exemplar({"trace_id": f"{e.trace_id:032x}",
                                      "span_id": f"{e.span_id:016x}"},
                                     e.value, e.time_unix_nano / 1e9)
                            for e in point.exemplars or () if e.trace_id]
                    if kept:
                        attrs = frozenset((_label(k), str(v)) for k, v in
                                          (point.attributes or {}).items())
                        found[(metric.name, attrs)] = kept
    return found


def _attach(families: dict[str, Any], found: dict[_Key, list[Exemplar]]) -> None:
    for family in families.values():
        if family.type != "histogram":
            continue
        bucket = f"{family.name}_bucket"
        for (name, attrs), exemplars in found.items():
            if name != family.name:
                continue
            low = -math.inf
            for i, sample in enumerate(family.samples):
                if sample.name != bucket or not attrs <= sample.labels.items():
                    continue
                le = float(sample.labels["le"])
                inside = [e for e in exemplars if low < e.value <= le]
                low = le
                if inside:  # the latest one in this bucket's range
                    family.samples[i] = sample._replace(exemplar=inside[-1])


class ExemplarPrometheusReader(PrometheusMetricReader):
    """``PrometheusMetricReader`` whose histogram buckets carry their exemplars.

    >>> from prometheus_client import CollectorRegistry
    >>> reader = ExemplarPrometheusReader(registry=CollectorRegistry())
    """

    def __init__(self, *, registry: CollectorRegistry = REGISTRY,
                 disable_target_info: bool = False, prefix: str = "") -> None:
        super().__init__(disable_target_info=disable_target_info, prefix=prefix,
                         registry=registry)
        collector = self._collector
        translate: Callable[[MetricsData, dict[str, Any]], None] | None = getattr(
            collector, "_translate_to_prometheus", None)
        if translate is None:
            guard.absorb(COMPONENT, CorevoObsError(
                "this opentelemetry-exporter-prometheus has no _translate_to_prometheus: "
                "exemplars are not served"))
            return

        def with_exemplars(data: MetricsData, families: dict[str, Any]) -> None:
            translate(data, families)
            try:
                _attach(families, _exemplars(data))
            except Exception as exc:  # noqa: BLE001 - a scrape without exemplars, not none
                guard.absorb(COMPONENT, exc)

        setattr(collector, "_translate_to_prometheus", with_exemplars)  # noqa: B010
