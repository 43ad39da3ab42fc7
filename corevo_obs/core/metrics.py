"""Build prometheus_client metric objects from the catalog, once per registry.

Every instrument asks here instead of constructing ``Counter``/``Histogram`` itself, so a
name, help text, label set or bucket layout can only come from ``corevo_obs.core.catalog``.
Tests pass a fresh ``CollectorRegistry``; production uses the default one.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.metrics import MetricWrapperBase

from .catalog import MetricSpec, spec, zero_label_sets
from .errors import CatalogError, ConfigError
from .settings import option, resolve, resolve_in_host

_lock = threading.Lock()
_built: weakref.WeakKeyDictionary[CollectorRegistry, dict[str, MetricWrapperBase]] = (
    weakref.WeakKeyDictionary()
)

BUCKETS_PREFIX: Final = "COREVO_BUCKETS"


def _default(name: str) -> tuple[float, ...]:
    return spec(name).buckets or ()


@dataclass(frozen=True)
class Buckets:
    """Bucket bounds (seconds) of the histograms a latency regression is read from.

    Defaults are the catalog's. Override them all at once, per registry, before the
    instrumentation builds the histograms: ``set_buckets(stages=(...))`` (keyword), else
    ``$COREVO_BUCKETS_LAG`` / ``$COREVO_BUCKETS_STAGES`` / ``$COREVO_BUCKETS_TOTAL``
    (comma-separated, increasing). Every process writing one multiprocess directory must
    use the same bounds. Dashboards and alerts read quantiles with ``histogram_quantile``
    over whatever ``le`` bounds exist, so they stay right with any layout.
    """

    lag: tuple[float, ...] = option(_default("corevo_event_loop_lag_seconds"))
    stages: tuple[float, ...] = option(_default("corevo_task_first_event_seconds"))
    total: tuple[float, ...] = option(_default("corevo_task_total_seconds"))


#: the histograms each ``Buckets`` field lays out
BUCKET_FIELDS: Final = {
    "corevo_event_loop_lag_seconds": "lag",
    "corevo_task_dispatch_seconds": "stages",
    "corevo_task_first_event_seconds": "stages",
    "corevo_task_external_seconds": "stages",
    "corevo_task_total_seconds": "total",
}
_layouts: weakref.WeakKeyDictionary[CollectorRegistry, Buckets] = weakref.WeakKeyDictionary()


def set_buckets(
    registry: CollectorRegistry | None = None,
    *,
    lag: Sequence[float] | None = None,
    stages: Sequence[float] | None = None,
    total: Sequence[float] | None = None,
) -> Buckets:
    """Choose the bucket bounds of ``registry``'s histograms (keyword > environment >
    catalog default); ``ConfigError`` names a bad value's source, or a histogram already
    built with other bounds (call this before the instrumentation starts).

    >>> from prometheus_client import CollectorRegistry
    >>> set_buckets(CollectorRegistry(), stages=(0.1, 0.2, 0.4)).stages
    (0.1, 0.2, 0.4)
    """
    reg = REGISTRY if registry is None else registry
    chosen = resolve(Buckets, BUCKETS_PREFIX, caller="set_buckets", lag=lag, stages=stages,
                     total=total)
    with _lock:
        built = _built.get(reg, {})
        for name, field in BUCKET_FIELDS.items():
            bounds = tuple(getattr(built.get(name), "_upper_bounds", ()))[:-1]
            if bounds and bounds != getattr(chosen, field):
                raise ConfigError(f"{name} is in use with other buckets already: call "
                                  "set_buckets() before the instrumentation starts",
                                  source="set_buckets")
        _layouts[reg] = chosen
    return chosen


def buckets(registry: CollectorRegistry | None = None) -> Buckets:
    """The layout of ``registry``: ``set_buckets``' choice, else the environment's (a bad
    value there is counted and logged once, and the default used: the host goes on)."""
    reg = REGISTRY if registry is None else registry
    found = _layouts.get(reg)
    if found is None:  # resolved outside the lock: a bad value is counted through metric()
        found = resolve_in_host(Buckets, BUCKETS_PREFIX, component="buckets", registry=reg)
        with _lock:
            found = _layouts.setdefault(reg, found)
    return found


def _construct(s: MetricSpec, registry: CollectorRegistry,
               bounds: tuple[float, ...] | None) -> MetricWrapperBase:
    common: dict[str, Any] = {"labelnames": s.labels, "registry": registry}
    if s.kind == "counter":
        return Counter(s.name, s.help, **common)
    if s.kind == "gauge":
        return Gauge(s.name, s.help, multiprocess_mode=s.gauge_mode, **common)
    return Histogram(s.name, s.help, buckets=bounds or s.buckets or (), **common)


def metric(name: str, registry: CollectorRegistry | None = None) -> Any:
    """The metric object for a catalog name in ``registry`` (default: the global one)."""
    reg = REGISTRY if registry is None else registry
    with _lock:
        found = _built.get(reg, {}).get(name)
    if found is not None:
        return found
    s = spec(name)
    field = BUCKET_FIELDS.get(name)
    bounds = None if field is None else getattr(buckets(reg), field)
    with _lock:
        per_registry = _built.setdefault(reg, {})
        found = per_registry.get(name)
        if found is None:
            found = per_registry[name] = _construct(s, reg, bounds)
        return found


class Mirror(Protocol):
    """A second destination for every series (``corevo_obs.otel`` installs one): given a
    spec, its labels, its bucket bounds and the prometheus child (None when the mirror
    replaces prometheus), it returns the child the instrumentation writes to."""

    replaces: bool

    def __call__(self, s: MetricSpec, labels: dict[str, str], bounds: tuple[float, ...] | None,
                 prometheus: Any) -> Any: ...


_mirror: Mirror | None = None


def set_mirror(mirror: Mirror | None) -> None:
    """Send the series built from now on to ``mirror`` too (None: prometheus only).

    The hook is here, in the one place every series is bound, so the runtime packages
    need not know a second destination exists: with none installed ``child()`` pays one
    global read.
    """
    global _mirror
    _mirror = mirror


def current_mirror() -> Mirror | None:
    """The installed mirror, if any."""
    return _mirror


def _bounds(name: str, registry: CollectorRegistry | None) -> tuple[float, ...] | None:
    field = BUCKET_FIELDS.get(name)
    return spec(name).buckets if field is None else getattr(buckets(registry), field)


def child(name: str, registry: CollectorRegistry | None = None, **labels: str) -> Any:
    """A pre-bound child (``labels()`` costs ~1 µs per call; bind once, observe often).

    Labels must be exactly the catalog's, and enumerated labels only take listed values.
    """
    s = spec(name)
    if set(labels) != set(s.labels):
        raise CatalogError(f"{name} takes labels {list(s.labels)}, got {sorted(labels)}")
    for label, allowed in s.values.items():
        if labels[label] not in allowed:
            raise CatalogError(f"{name}: {label}={labels[label]!r} is not one of {allowed}")
    mirror = _mirror
    if mirror is not None and mirror.replaces:
        return mirror(s, labels, _bounds(name, registry), None)
    m = metric(name, registry)
    bound = m.labels(**labels) if s.labels else m
    if mirror is not None:
        return mirror(s, labels, _bounds(name, registry), bound)
    return bound


def zero_counters(owner: str, registry: CollectorRegistry | None = None, **labels: str) -> None:
    """Expose ``owner``'s counters at 0 now (``catalog.ZEROED``): one child per label set
    the owner can produce, with ``labels`` (``worker=``, and the open labels it names).

    An owner calls this once when it starts, so an alert's ``increase()`` sees its first
    event and a scrape gap is never mistaken for a new series. Binding a child that
    exists already is a lookup: calling it twice changes nothing.

    >>> from prometheus_client import CollectorRegistry
    >>> reg = CollectorRegistry()
    >>> zero_counters("gunicorn-master", reg, worker="w0")
    >>> reg.get_sample_value("corevo_worker_killed_total",
    ...                      {"worker": "w0", "reason": "timeout"})
    0.0
    """
    for s, label_set in zero_label_sets(owner, **labels):
        if _mirror is not None:  # the mirror's series at 0 as well (binding exposes it)
            child(s.name, registry, **label_set)
        elif s.labels:  # an unlabelled counter is exposed at 0 once built
            metric(s.name, registry).labels(**label_set)
        else:
            metric(s.name, registry)
