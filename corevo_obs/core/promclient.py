"""Every use of prometheus_client's private insides, in one module.

The hot paths (lease metrics on every acquire, the multiprocess merge) skip the public
API's per-call checks and locks, and multiprocess mode must choose the value class
before the first metric exists. All of that touches attributes prometheus_client does
not promise, so it lives here and nowhere else, checked against the versions in
``SUPPORTED`` by tests/test_promclient.py; each writer probes the layout once and falls
back to the public API when a release changes it, so a new prometheus_client can cost
speed, never a wrong or missing sample.
"""

from __future__ import annotations

import functools
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from prometheus_client import values
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector

__all__ = [
    "SUPPORTED",
    "FastObserve",
    "add",
    "fast_inc",
    "fast_set",
    "histogram_cells",
    "observe_cells",
    "merge_multiprocess",
    "plain_cells",
    "put",
    "set_multiprocess_mode",
    "share_lock",
    "use_multiprocess_values",
    "value_cell",
]

#: prometheus_client releases whose insides this module was checked against
SUPPORTED: Final = ((0, 20), (0, 26))

Cell = Any  # a ``MutexValue``: ``_value`` guarded by ``_lock``


def use_multiprocess_values() -> None:
    """Switch new metrics to mmap-backed values (what ``PROMETHEUS_MULTIPROC_DIR`` at
    import time would have done), once, before any metric exists."""
    if values.ValueClass is values.MutexValue:
        values.ValueClass = values.MultiProcessValue()


def merge_multiprocess(metrics: Mapping[str, Metric]) -> list[Metric]:
    """prometheus_client's own merge of per-process samples (what a scrape serves)."""
    return list(MultiProcessCollector._accumulate_metrics(dict(metrics), True))


def set_multiprocess_mode(metric: Metric, mode: str) -> None:
    """Tell the merge how to combine a gauge's per-process samples."""
    metric._multiprocess_mode = mode  # type: ignore[attr-defined]


def fast_inc(counter: Any) -> Callable[[float], None]:
    """The bound child's value ``inc``, skipping the wrapper's per-call checks (a bound
    child is always observable, our amounts are never negative); ``counter.inc`` if the
    insides changed."""
    inc = getattr(getattr(counter, "_value", None), "inc", None)
    return inc if callable(inc) else counter.inc  # type: ignore[no-any-return]


def fast_set(gauge: Any) -> Callable[[float], None]:
    """The bound gauge's value ``set``, keeping what ``Gauge.set`` adds: a timestamp for
    the ``mostrecent`` multiprocess modes (so the newest writer wins across processes)."""
    set_value = getattr(getattr(gauge, "_value", None), "set", None)
    if not callable(set_value) or not hasattr(gauge, "_is_most_recent"):
        return gauge.set  # type: ignore[no-any-return]
    if gauge._is_most_recent:
        return lambda v: set_value(float(v), timestamp=time.time())
    return set_value  # type: ignore[no-any-return]


class FastObserve:
    """``Histogram.observe`` for a bound child in one bisect (same buckets, same samples)."""

    __slots__ = ("observe",)

    def __init__(self, histogram: Any) -> None:
        try:
            add_sum = histogram._sum.inc
            buckets = [b.inc for b in histogram._buckets]
            bounds = list(histogram._upper_bounds)
        except AttributeError:  # pragma: no cover - a future prometheus_client
            self.observe = histogram.observe
            return

        def observe(amount: float) -> None:
            add_sum(amount)
            buckets[bisect_left(bounds, amount)](1)  # first bound >= amount, like observe()

        self.observe = observe


# --- a group of in-process values written under one lock ------------------------------

_sharing = threading.Lock()  # serialises handing a group's lock to its values


@functools.cache
def _mutex_layout_ok() -> bool:
    """Whether ``MutexValue`` still reads ``_value`` under ``_lock``: probed once on a
    private value, so a release that changes its insides sends callers down the public
    path instead of writing where no scrape looks."""
    try:
        probe = values.MutexValue("counter", "probe", "probe", (), (), "")
        lock = probe._lock
        probe._lock = threading.Lock()
        probe._value += 2.0
        probe.inc(1.0)
        return type(lock) is type(probe._lock) and probe.get() == 3.0
    except Exception:  # noqa: BLE001 - any surprise means: do not take the fast path
        return False


def value_cell(child: Any) -> Cell:
    """The value behind a bound counter or gauge."""
    return child._value


def histogram_cells(child: Any) -> tuple[Cell, list[Cell], list[float]]:
    """A bound histogram's sum value, bucket values and upper bounds."""
    return child._sum, list(child._buckets), list(child._upper_bounds)


def plain_cells(counters_and_gauges: Iterable[Any], histograms: Iterable[Any]) -> list[Cell] | None:
    """Every value behind these bound children, or None unless all are plain in-process
    ``MutexValue``s of the known layout (multiprocess values are mmap-backed: not ours)."""
    try:
        out = [value_cell(c) for c in counters_and_gauges]
        for h in histograms:
            total, buckets, _ = histogram_cells(h)
            out += [total, *buckets]
    except AttributeError:  # pragma: no cover - a future prometheus_client
        return None
    ok = _mutex_layout_ok() and all(
        type(v) is values.MutexValue and hasattr(v, "_lock") and hasattr(v, "_value")
        for v in out)
    return out if ok else None


def share_lock(cells: list[Cell]) -> threading.Lock:
    """Give every cell the first one's lock and return it: one ``with`` then guards a
    batch of writes, and a scrape's ``get()`` of any of them still excludes the batch."""
    lock: threading.Lock = cells[0]._lock
    with _sharing:
        for cell in cells:
            cell._lock = lock
    return lock


def add(cell: Cell, amount: float) -> None:
    """``cell += amount``; the caller holds the shared lock."""
    cell._value += amount


def put(cell: Cell, value: float) -> None:
    """``cell = value``; the caller holds the shared lock."""
    cell._value = value


def observe_cells(cells: tuple[Cell, list[Cell], list[float]], amount: float) -> None:
    """One histogram observation into its cells; the caller holds the shared lock."""
    total, buckets, bounds = cells
    total._value += amount
    buckets[bisect_left(bounds, amount)]._value += 1  # first bound >= amount, like observe()
