"""Collectors for a compacted directory: the locked reader and the directory's own health.

``LockedMultiProcessCollector`` is prometheus_client's collector reading under the shared
directory lock, so a compaction (exclusive lock) is atomic from its point of view: it sees
the dead writers' files or the accumulator that replaced them, never both or neither.
A corrupt file is left out of the scrape (and reported once) instead of failing it.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from pathlib import Path

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector

from ..catalog import spec
from ..guard import absorb
from .compactor import _CORRUPT, read_entries
from .journal import consistent_view
from .status import scan


class LockedMultiProcessCollector(MultiProcessCollector):
    """Drop-in ``MultiProcessCollector`` that is safe to run during compactions.

    >>> reg = CollectorRegistry()
    >>> LockedMultiProcessCollector(reg, path="/run/metrics")   # doctest: +SKIP
    """

    def collect(self) -> Iterable[Metric]:
        d = Path(self._path)
        files = os.path.join(self._path, "*.db")
        with ExitStack() as stack:
            try:
                stack.enter_context(consistent_view(d))
            except OSError as exc:  # e.g. a read-only view of the directory: read unlocked
                absorb("mpdir-lock", exc)
            return self._merge_readable(glob.glob(files))

    def _merge_readable(self, files: list[str]) -> list[Metric]:
        try:
            return list(self.merge(files, accumulate=True))
        except _CORRUPT:
            pass
        # A live writer's brand-new file is empty for a moment (prometheus_client
        # creates it, then sizes it): that is no data, not damage. Anything else is.
        empty = {f for f in files if _size(f) == 0}
        bad = {f for f in files if f not in empty and not _readable(f)}
        if bad:
            absorb("mpdir-collect", RuntimeError(f"left unreadable files out: {sorted(bad)}"))
        return list(self.merge([f for f in files if f not in bad | empty], accumulate=True))


def _readable(path: str) -> bool:
    try:
        read_entries(Path(path))
    except FileNotFoundError:
        return True
    except _CORRUPT:
        return False
    return True


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0


class DirHealthCollector:
    """The directory's self-health, from a read-only scan at scrape time."""

    def __init__(self, path: str | os.PathLike[str], registry: CollectorRegistry | None = None):
        self._path = Path(path)
        if registry is not None:
            registry.register(self)

    def describe(self) -> list[Metric]:
        return []  # scanning at registration time would be wasted work

    def collect(self) -> Iterator[Metric]:
        st = scan(self._path)
        yield _gauge("corevo_metrics_dir_files", st.files)
        yield _gauge("corevo_metrics_dir_dead_writers", len(st.dead_writers))
        s = spec("corevo_metrics_compactions_total")
        yield CounterMetricFamily(s.name, s.help, value=st.stats.compactions)
        yield _gauge("corevo_metrics_last_compaction_seconds", st.stats.last_seconds)


def _gauge(name: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, spec(name).help, value=value)


def install_collectors(registry: CollectorRegistry, path: str | os.PathLike[str]) -> None:
    """What the suite's ``/metrics`` serves in multiprocess mode."""
    LockedMultiProcessCollector(registry, path=str(path))
    DirHealthCollector(path, registry)
