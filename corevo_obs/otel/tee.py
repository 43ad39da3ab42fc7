"""Children that write one value to two destinations: prometheus and OpenTelemetry.

What ``core.metrics.child`` hands out while OTel metrics run beside the prometheus path:
each method calls the prometheus child's, then the OTel child's (which never raises).
The bound methods are kept, so a write costs two calls and no attribute lookups.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["tee"]


class TeeCounter:
    __slots__ = ("_prom", "_otel")

    def __init__(self, prom: Any, otel: Any) -> None:
        self._prom, self._otel = prom.inc, otel.inc

    def inc(self, amount: float = 1, exemplar: Mapping[str, str] | None = None) -> None:
        self._prom(amount, exemplar)
        self._otel(amount, exemplar)


class TeeGauge:
    __slots__ = ("_prom", "_otel")

    def __init__(self, prom: Any, otel: Any) -> None:
        self._prom, self._otel = prom, otel

    def set(self, value: float) -> None:
        self._prom.set(value)
        self._otel.set(value)

    def inc(self, amount: float = 1) -> None:
        self._prom.inc(amount)
        self._otel.inc(amount)

    def dec(self, amount: float = 1) -> None:
        self._prom.dec(amount)
        self._otel.dec(amount)

    def set_to_current_time(self) -> None:
        self._prom.set_to_current_time()
        self._otel.set_to_current_time()


class TeeHistogram:
    __slots__ = ("_prom", "_otel")

    def __init__(self, prom: Any, otel: Any) -> None:
        self._prom, self._otel = prom.observe, otel.observe

    def observe(self, amount: float, exemplar: Mapping[str, str] | None = None) -> None:
        self._prom(amount, exemplar)
        self._otel(amount, exemplar)


_TEE: Final = {"counter": TeeCounter, "gauge": TeeGauge, "histogram": TeeHistogram}


def tee(kind: str, prom: Any, otel: Any) -> Any:
    """The two-destination child of a catalog ``kind``."""
    return _TEE[kind](prom, otel)
