"""Collectors for a compacted directory: the locked reader and the directory's own health.

``LockedMultiProcessCollector`` is prometheus_client's collector reading under the shared
directory lock, so a compaction (exclusive lock) is atomic from its point of view: it sees
the dead writers' files or the accumulator that replaced them, never both or neither.

It reads through the suite's own safe path (``dbfile``: no symlink followed, no FIFO or
directory opened for reading, no mmap) instead of handing prometheus_client a list of
paths, and merges by prometheus_client's rules (``aggregate``: the same text, tested
byte for byte), so it reports what ``MultiProcessCollector`` would, except that a host
endpoint sums the catalog's ``host_sum`` metrics across workers. Anything it cannot read
safely (corrupt bytes, a planted FIFO, mode 000) is left out of the scrape, named,
counted and logged once, instead of failing or hanging it. When the readers' lock stays
taken (a stopped compactor, a foreign ``flock``) it waits ``SCRAPE_WAIT`` and then reads
without it, applying a committed journal in its head: the files it would remove are
left out and the accumulators it would rename in are read from where they wait.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import cast

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.multiprocess import MultiProcessCollector

from ..core import promclient
from ..core.catalog import spec
from ..core.errors import CorevoObsError
from ..core.guard import absorb
from .aggregate import Aggregate, Family
from .compactor import _CORRUPT, _why
from .filecache import FileCache
from .journal import Plan, consistent_view, unlocked_plan
from .layout import STATE_DIR, MetricFile, list_metric_files, parse_name
from .lock import SCRAPE_WAIT, LockBusy
from .safe import DirFds, describe, exists_at
from .status import scan

Source = tuple[int, str, str, MetricFile]  # dir fd, name at it, path for messages, parsed


class LockedMultiProcessCollector(MultiProcessCollector):
    """Drop-in ``MultiProcessCollector`` that is safe to run during compactions and over a
    directory that someone else can write. ``only_pid`` reads one writer's own files
    (a per-worker endpoint), no accumulator and no other writer. ``by_worker=False``
    serves the catalog's ``host_sum`` metrics summed across workers (a host endpoint).

    It keeps what it learnt of each file between scrapes (``filecache``, ``aggregate``):
    a scrape reads the files' values and adds them up, without parsing keys again.

    Example: ``LockedMultiProcessCollector(CollectorRegistry(), path="/run/metrics")``
    """

    def __init__(self, registry: CollectorRegistry | None, path: str | None = None,
                 only_pid: int | None = None, own: CollectorRegistry | None = None,
                 *, by_worker: bool = True) -> None:
        self._only_pid = only_pid
        self._own = own
        self._files = FileCache()
        self._merge = Aggregate(by_worker=by_worker)
        self._lock = threading.Lock()  # one scrape at a time uses the memo
        promclient.reserve_value_files()  # a scraper's own counters: no SIGBUS either
        init = cast("Callable[[CollectorRegistry | None, str | None], None]",
                    super().__init__)  # prometheus_client leaves it unannotated
        init(registry, path)

    def collect(self) -> list[Family]:
        """This scrape's merge (``Family`` objects: ``Metric`` whose samples are made
        only if asked for; the host endpoint formats their rows itself)."""
        d = Path(self._path)
        with self._lock, ExitStack() as stack:
            try:
                locked = stack.enter_context(consistent_view(d, timeout=SCRAPE_WAIT))
                if not locked:
                    absorb("mpdir-lock", LockBusy(
                        f"{d}: readers' lock busy for {SCRAPE_WAIT} s; scraped without it"))
            except OSError as exc:  # e.g. a read-only view of the directory: read unlocked
                absorb("mpdir-lock", exc)
                locked = False
            self._merge.begin()
            merge_directory(d, None if locked else unlocked_plan(d), self._files, self._merge,
                            self._only_pid)
            stack.close()  # the directory is read: let compactions commit
            if self._own is not None:
                add_own_errors(self._merge, self._own)
            return self._merge.families()


#: the families a reader that writes no files adds from its own memory: what it absorbed
OWN_FAMILIES = ("corevo_instrumentation_errors",)


def add_own_errors(merge: Aggregate, own: CollectorRegistry) -> None:
    """Add the failures this process absorbed (counted in ``own``, in its memory: a
    reader such as ``metrics serve`` writes no files) into the directory's family of
    the same name, so the exposition has each series once."""
    for family in own.collect():
        if family.name not in OWN_FAMILIES:
            continue
        for sample in family.samples:
            if not sample.name.endswith("_created"):
                merge.add_sample(family.name, family.documentation, sample.name,
                                 tuple(sorted(sample.labels.items())), sample.value)


def merge_directory(d: Path, plan: Plan | None, files: FileCache, merge: Aggregate,
                    only_pid: int | None = None) -> None:
    """Add every metric file of ``d`` that can be read safely, as ``plan`` would leave
    it, into ``merge`` (read through the ``files`` memo)."""
    left_out: list[str] = []
    read: set[str] = set()
    with DirFds(d) as fds:
        found, irregular = list_metric_files(d)
        if only_pid is not None:
            found = [f for f in found if f.pid == only_pid]
            irregular = [f for f in irregular if f.pid == only_pid]
        left_out += [f"{f.path} ({describe(str(f.path))})" for f in irregular]
        for dir_fd, name, where, mf in _sources(fds, found, plan):
            try:
                layout, values, stamps = files.read(dir_fd, name, where,
                                                    accumulator=mf.is_accumulator)
            except FileNotFoundError:
                continue  # a live gauge removed by mark_process_dead since the listing
            except _CORRUPT as exc:
                left_out.append(f"{where} ({_why(exc)})")
                continue
            merge.add_file(mf, layout, values, stamps)
            read.add(str(mf.path))
    files.prune()
    merge.forget(merge.file_paths - read)
    if left_out:
        absorb("mpdir-collect", RuntimeError(
            f"left unreadable files out of the scrape: {'; '.join(left_out)}"))


def _sources(fds: DirFds, files: list[MetricFile], plan: Plan | None) -> Iterator[Source]:
    renamed = {target: tmp for tmp, target in plan.renames} if plan else {}
    removed = {name for where, name in plan.removals if where == "top"} if plan else set()
    present = set()
    for f in files:
        name = f.path.name
        present.add(name)
        if name in removed:
            continue
        tmp = renamed.get(name)
        if tmp is not None and exists_at(fds.state, tmp):
            yield fds.state, tmp, fds.where(STATE_DIR, tmp), f
        else:
            yield fds.top, name, str(f.path), f
    for target, tmp in renamed.items():  # a type's first accumulator, not yet renamed in
        parsed = parse_name(fds.path / target)
        if target not in present and parsed is not None and exists_at(fds.state, tmp):
            yield fds.state, tmp, fds.where(STATE_DIR, tmp), parsed


class DirHealthCollector:
    """The directory's self-health, from a read-only scan at scrape time."""

    def __init__(self, path: str | os.PathLike[str], registry: CollectorRegistry | None = None):
        self._path = Path(path)
        if registry is not None:
            registry.register(self)

    def describe(self) -> list[Metric]:
        return []  # scanning at registration time would be wasted work

    def collect(self) -> Iterator[Metric]:
        try:
            st = scan(self._path)
        except (OSError, CorevoObsError) as exc:  # never fail the scrape over its own health
            absorb("mpdir-health", exc)
            return
        yield _gauge("corevo_metrics_dir_files", st.files)
        yield _gauge("corevo_metrics_dir_dead_writers", len(st.dead_writers))
        s = spec("corevo_metrics_compactions_total")
        yield CounterMetricFamily(s.name, s.help, value=st.stats.compactions)
        yield _gauge("corevo_metrics_last_compaction_seconds", st.stats.last_seconds)


def _gauge(name: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, spec(name).help, value=value)


def install_collectors(registry: CollectorRegistry, path: str | os.PathLike[str],
                       only_pid: int | None = None, own: CollectorRegistry | None = None,
                       *, by_worker: bool = True) -> None:
    """What the suite's ``/metrics`` serves in multiprocess mode: the directory's
    aggregate and its health, or (``only_pid``) one writer's own series; ``own``: the
    in-memory registry of a serving process that writes no files, whose absorbed
    failures are served with the aggregate; ``by_worker=False``: the catalog's
    ``host_sum`` metrics summed across workers."""
    LockedMultiProcessCollector(registry, path=str(path), only_pid=only_pid, own=own,
                                by_worker=by_worker)
    if only_pid is None:
        DirHealthCollector(path, registry)
