"""The directory's merge, kept from scrape to scrape: each file entry's series is worked
out once, and a scrape adds numbers into slots.

What it reports is what prometheus_client's ``MultiProcessCollector`` reports (its merge
rules, its order; tests compare the text byte for byte), with one deliberate change at a
host endpoint: a metric the catalog marks ``host_sum`` (the per-kind task-stage
histograms, whose size is workers x kinds x buckets) is summed across workers, its
``worker`` label dropped, unless ``by_worker`` keeps them apart. Sums of counts stay
exact: the sum of every worker's buckets is the host's bucket.

Cost per scrape, once the files' layouts are known (``filecache``): one ``pread`` and one
``struct`` unpack per file, one addition per entry, no key parsing and no per-sample
objects until the exposition (``fastexpo``) formats the few thousand series it serves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from operator import add
from typing import Any, Final, cast

from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample as PromSample
from prometheus_client.utils import floatToGoString

from ..core.catalog import host_summed
from .dbfile import parse_key
from .filecache import Layout
from .layout import MetricFile

#: prometheus_client's float formatting (``+Inf``, ``1e+06``), unannotated there
go_float = cast("Callable[[float], str]", floatToGoString)
Labels = tuple[tuple[str, str], ...]
#: one served sample: (sample name, sorted labels, value)
Sample = tuple[str, Labels, float]
WORKER_LABEL: Final = "worker"
_RULES: Final = {"min": "min", "livemin": "min", "max": "max", "livemax": "max",
                 "sum": "sum", "livesum": "sum", "mostrecent": "recent",
                 "livemostrecent": "recent", "all": "all", "liveall": "all"}
#: slots kept for series no longer served, beyond those served, before a fresh start
_SPARE_SLOTS: Final = 4096


class Family(Metric):
    """One merged metric as served. ``rows`` are its samples as plain tuples, what the
    host endpoint formats (``fastexpo``); ``samples``, prometheus_client's ``Sample``
    list, is made only when something asks for it (``generate_latest``, a test)."""

    def __init__(self, name: str, documentation: str, typ: str, rows: list[Sample]) -> None:
        super().__init__(name, documentation, typ)
        del self.samples  # made on first use, from ``rows``
        self.rows = rows

    def __getattr__(self, attr: str) -> Any:
        if attr != "samples":
            raise AttributeError(attr)
        self.samples = [PromSample(n, dict(labels), v) for n, labels, v in self.rows]
        return self.samples


class _Runs(tuple[int, ...]):
    """Slots of a file's entries, with their runs of consecutive slots: ``(first entry,
    entry after the last, first slot)``. Workers' files repeat each other's order, so a
    few runs cover a file and its sums are added a run at a time."""

    runs: list[tuple[int, int, int]]

    def __new__(cls, slots: list[int]) -> _Runs:
        self = super().__new__(cls, slots)
        self.runs = []
        start = 0
        for i in range(1, len(slots) + 1):
            if i == len(slots) or slots[i] != slots[i - 1] + 1:
                self.runs.append((start, i, slots[start]))
                start = i
        return self


@dataclass
class _Slot:
    family: _FamilyState
    name: str
    labels: Labels
    le: float | None  # a histogram bucket's bound
    group: Labels  # the labels without ``le`` (a histogram's series)


@dataclass
class _FamilyState:
    name: str
    documentation: str
    type: str
    slots: list[int] = field(default_factory=list)
    #: a histogram's series, made again when a slot is added
    plan: list[_Histogram] = field(default_factory=list)
    planned: int = 0  # len(slots) when ``plan`` was made


class Aggregate:
    """Merge state of one reader (one endpoint). Not thread-safe: the collector holds
    its lock around ``begin`` .. ``families``."""

    def __init__(self, *, by_worker: bool = True) -> None:
        self._summed = frozenset() if by_worker else host_summed()
        self._reset()

    def _reset(self) -> None:
        self._slot_of: dict[tuple[str, str, Labels], int] = {}
        self._slots: list[_Slot] = []
        self._families: dict[str, _FamilyState] = {}
        self._file_slots: dict[str, tuple[Layout, Sequence[int]]] = {}
        self._key_slots: dict[str, dict[str, int]] = {}
        self._acc: list[float] = []
        self._stamp: list[float] = []
        self._present: set[int] = set()

    def begin(self) -> None:
        """Start a scrape: nothing present yet."""
        if len(self._slots) > len(self._present) + _SPARE_SLOTS:
            self._reset()  # series of the past (dead pids' gauges) piled up: start over
        self._acc = [0.0] * len(self._slots)
        self._stamp = [0.0] * len(self._slots)
        self._present = set()

    def add_file(self, mf: MetricFile, layout: Layout, values: tuple[float, ...],
                 stamps: tuple[float, ...]) -> None:
        """Merge one file's entries (``layout.keys`` in order) into this scrape."""
        mode = mf.gauge_mode
        rule = "sum" if mode is None else _RULES.get(mode, "all")
        cached = self._file_slots.get(str(mf.path))
        if cached is not None and cached[0] is layout:
            slots = cached[1]
        else:
            slots = self._slots_of(mf, layout.keys, rule)
            self._file_slots[str(mf.path)] = (layout, slots)
        acc, present = self._acc, self._present
        if rule == "sum":
            if isinstance(slots, _Runs):  # slots in runs of file order: C-level passes
                for start, stop, at in slots.runs:
                    end = at + stop - start
                    acc[at:end] = map(add, acc[at:end], values[start:stop])
            else:
                for s, v in zip(slots, values, strict=True):
                    acc[s] += v
            present.update(slots)
            return
        for s, v, ts in zip(slots, values, stamps, strict=True):
            seen = s in present
            if rule == "recent":
                if ts > self._stamp[s]:  # prometheus_client keeps only stamps > 0
                    acc[s], self._stamp[s] = v, ts
                    present.add(s)
                continue
            if not seen or rule == "all" or (rule == "max" and v > acc[s]) \
                    or (rule == "min" and v < acc[s]):
                acc[s] = v
            present.add(s)

    def add_sample(self, metric: str, documentation: str, name: str, labels: Labels,
                   value: float) -> None:
        """Add one in-memory counter sample (a serving process's own absorbed errors)."""
        s = self._slot(metric, documentation, "counter", name, labels)
        if s not in self._present:
            self._acc[s] = 0.0
            self._present.add(s)
        self._acc[s] += value

    def forget(self, paths: Iterable[str]) -> None:
        """Drop the slot lists of files that are gone."""
        for path in paths:
            self._file_slots.pop(path, None)

    @property
    def file_paths(self) -> set[str]:
        return set(self._file_slots)

    def _slots_of(self, mf: MetricFile, keys: tuple[str, ...], rule: str) -> Sequence[int]:
        typ = mf.prefix if mf.gauge_mode is None else "gauge"
        # every writer's file repeats the same keys: their slots, per file type (not for
        # ``all`` gauges, whose series carry the writer's pid)
        memo = self._key_slots.setdefault(mf.prefix, {}) if rule != "all" else {}
        out = []
        for key in keys:
            found = memo.get(key)
            if found is not None:
                out.append(found)
                continue
            metric, name, labels, help_text = parse_key(key)
            if rule == "all":
                labels = tuple(sorted((*labels, ("pid", mf.writer))))
            elif rule == "sum" and metric in self._summed:
                labels = tuple(p for p in labels if p[0] != WORKER_LABEL)
            found = memo[key] = self._slot(metric, help_text, typ, name, labels)
            out.append(found)
        runs = _Runs(out)
        return runs if len(runs.runs) * 8 <= len(out) else tuple(out)

    def _slot(self, metric: str, documentation: str, typ: str, name: str,
              labels: Labels) -> int:
        le: float | None = None
        group = labels
        if typ == "histogram":
            for k, v in labels:
                if k == "le":
                    le = float(v)
                    group = tuple(p for p in labels if p[0] != "le")
                    labels = tuple(sorted((*group, ("le", go_float(le)))))
                    break
        ident = (metric, name, labels)
        found = self._slot_of.get(ident)
        if found is not None:
            return found
        family = self._families.get(metric)
        if family is None:
            family = self._families[metric] = _FamilyState(metric, documentation, typ)
        found = self._slot_of[ident] = len(self._slots)
        self._slots.append(_Slot(family, name, labels, le, group))
        family.slots.append(found)
        self._acc.append(0.0)
        self._stamp.append(0.0)
        return found

    def families(self) -> list[Family]:
        """This scrape's merge, in serving order (families and series by first sight)."""
        out = []
        present, acc, slots = self._present, self._acc, self._slots
        for fam in self._families.values():
            if fam.type == "histogram":
                rows = self._histogram(fam)
            else:
                rows = [(slots[s].name, slots[s].labels, acc[s]) for s in fam.slots
                        if s in present]
            if rows:
                out.append(Family(fam.name, fam.documentation, fam.type, rows))
        return out

    def _histogram(self, fam: _FamilyState) -> list[Sample]:
        """Per series: ``_sum``, the buckets made cumulative, ``_count`` (their total)."""
        if fam.planned != len(fam.slots):
            fam.plan, fam.planned = [self._series(fam, *g) for g in self._groups(fam)], \
                len(fam.slots)
        acc, present = self._acc, self._present
        rows: list[Sample] = []
        everyone = present.issuperset(fam.slots)  # the usual case: every series is here
        for h in fam.plan:
            g = h if everyone else self._series(  # some have gone (a gauge's writer, a file)
                fam, [s for s in h.plain if s in present],
                [s for s in h.buckets if s in present], h.group)
            rows += zip(g.plain_names, g.plain_labels, [acc[s] for s in g.plain], strict=True)
            if g.buckets:
                totals = list(accumulate(g.values(acc)))
                rows += zip(g.bucket_names, g.bucket_labels, totals, strict=True)
                rows.append((g.count_name, g.group, totals[-1]))
        return rows

    def _groups(self, fam: _FamilyState) -> list[tuple[list[int], list[int], Labels]]:
        """A histogram's series: plain slots (``_sum``), bucket slots by bound, labels."""
        groups: dict[Labels, tuple[list[int], list[tuple[float, int]]]] = {}
        for s in fam.slots:
            slot = self._slots[s]
            plain, buckets = groups.setdefault(slot.group, ([], []))
            if slot.le is None:
                plain.append(s)
            else:
                buckets.append((slot.le, s))
        return [(plain, [s for _, s in sorted(buckets)], group)
                for group, (plain, buckets) in groups.items()]

    def _series(self, fam: _FamilyState, plain: list[int], buckets: list[int],
                group: Labels) -> _Histogram:
        slots = self._slots
        return _Histogram(
            plain, [slots[s].name for s in plain], [slots[s].labels for s in plain],
            buckets, [f"{fam.name}_bucket"] * len(buckets),
            [slots[s].labels for s in buckets], f"{fam.name}_count", group)


@dataclass
class _Histogram:
    """One histogram series' slots and what its rows say besides the values."""

    plain: list[int]
    plain_names: list[str]
    plain_labels: list[Labels]
    buckets: list[int]
    bucket_names: list[str]
    bucket_labels: list[Labels]
    count_name: str
    group: Labels

    def values(self, acc: list[float]) -> Iterable[float]:
        return [acc[s] for s in self.buckets]
