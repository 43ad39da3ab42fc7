"""Read the suite's own metrics while the load runs, and turn them into observations.

A side thread scrapes the one metrics endpoint every ``interval`` (0.5 s). Each scrape
keeps only the series the time plots need (loop lag buckets, stalls, offload gauges and
rejections, lease occupancy); full scrapes are kept at the phase marks (load start, load
end), whose difference gives the run's stage histograms and counters. Lag quantiles are
computed per worker from bucket deltas, as ``histogram_quantile`` would: linear within
the bucket, and a maximum that is only known as a bucket range ``(lo, hi]``.
"""

from __future__ import annotations

import math
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from prometheus_client.parser import text_string_to_metric_families

from ..core.catalog import CATALOG
from .loopback import urlopen

Labels = tuple[tuple[str, str], ...]
Samples = dict[tuple[str, Labels], float]

LAG: Final = "corevo_event_loop_lag_seconds"
STAGES: Final = ("dispatch", "first_event", "external", "total")
_TIMESERIES: Final = (
    f"{LAG}_bucket", "corevo_event_loop_stalls_total", "corevo_offload_waiting",
    "corevo_offload_in_flight", "corevo_offload_limit", "corevo_offload_rejected_total",
    "corevo_lease_held", "corevo_lease_limit", "corevo_event_loop_heartbeat_timestamp_seconds",
)
#: the claim protocol's series: any of them means the app reports claims
CLAIM_SERIES: Final = ("corevo_claim_total", "corevo_claim_start_total",
                       "corevo_job_terminal_total", "corevo_events_projected_total")
for _name in (*_TIMESERIES, *CLAIM_SERIES):  # every name read here is a catalog name
    assert _name.removesuffix("_bucket") in CATALOG, _name


@dataclass
class Snapshot:
    at: float
    samples: Samples


@dataclass
class Scraper:
    """Scrapes ``url`` every ``interval`` on a daemon thread until :meth:`stop`."""

    url: str
    clock: Callable[[], float]
    interval: float = 0.5
    snapshots: list[Snapshot] = field(default_factory=list)
    marks: dict[str, Snapshot] = field(default_factory=dict)
    failures: int = 0
    last_error: str | None = None
    #: how long the run waited after the load for started claims to end (None: no wait)
    settled_after: float | None = None

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="corevo-loadtest-scrape",
                                        daemon=True)

    def start(self) -> Scraper:
        self._thread.start()
        return self

    def scrape(self) -> Snapshot | None:
        at = self.clock()
        try:
            with urlopen(self.url, timeout=2) as reply:
                text = reply.read().decode("utf-8", errors="replace")
            return Snapshot(at, parse(text))
        except (OSError, ValueError) as exc:
            self.failures += 1
            self.last_error = f"{type(exc).__name__}: {exc}"
            return None

    def mark(self, name: str) -> None:
        """Keep a full scrape under ``name`` (retried briefly: a mark must not be lost)."""
        for _ in range(10):
            snap = self.scrape()
            if snap is not None:
                self.marks[name] = snap
                return
            time.sleep(0.2)

    def _run(self) -> None:
        nxt = self.clock()
        while not self._stop.is_set():
            snap = self.scrape()
            if snap is not None and len(self.snapshots) < 5000:
                keep = {k: v for k, v in snap.samples.items() if k[0] in _TIMESERIES}
                self.snapshots.append(Snapshot(snap.at, keep))
            nxt += self.interval
            self._stop.wait(max(0.0, nxt - self.clock()))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)


def parse(text: str) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        if not family.name.startswith("corevo_"):
            continue
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = float(s.value)
    return out


def fetch(url: str) -> Samples:
    with urlopen(url, timeout=5) as reply:
        return parse(reply.read().decode("utf-8", errors="replace"))


# --- histograms ------------------------------------------------------------------
def buckets_by(samples: Samples, name: str, key: str | None) -> dict[str, dict[float, float]]:
    """Cumulative bucket counts of histogram ``name`` summed by label ``key`` (or all)."""
    out: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for (sample, labels), v in samples.items():
        if sample != f"{name}_bucket":
            continue
        d = dict(labels)
        group = d.get(key, "") if key else "all"
        out[group][float(d["le"])] += v
    return {g: dict(b) for g, b in out.items()}


def delta(after: dict[float, float], before: dict[float, float] | None) -> dict[float, float]:
    """Bucket counts gained between two scrapes; a reset (the series went back) is a new start."""
    if before is None:
        return dict(after)
    diff = {le: after[le] - before.get(le, 0.0) for le in after}
    return dict(after) if any(v < 0 for v in diff.values()) else diff


@dataclass(frozen=True)
class HistSummary:
    count: int
    p50: float | None
    p99: float | None
    max_lo: float | None  # the maximum lies in (max_lo, max_hi]
    max_hi: float | None  # inf: beyond the last bucket

    def as_dict(self) -> dict[str, Any]:
        return {"count": self.count, "p50_seconds": _r(self.p50), "p99_seconds": _r(self.p99),
                "max_over_seconds": _r(self.max_lo),
                "max_at_most_seconds": None if self.max_hi in (None, math.inf)
                else _r(self.max_hi)}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def summarize(cumulative: dict[float, float]) -> HistSummary:
    bounds = sorted(cumulative)
    total = cumulative.get(math.inf, cumulative[bounds[-1]] if bounds else 0.0)
    if total <= 0:
        return HistSummary(0, None, None, None, None)
    max_lo = max_hi = None
    prev_le, prev_c = 0.0, 0.0
    for le in bounds:
        if cumulative[le] > prev_c:
            max_lo, max_hi = prev_le, le
        prev_le, prev_c = le, cumulative[le]
    return HistSummary(int(round(total)), hist_quantile(cumulative, 0.5),
                       hist_quantile(cumulative, 0.99), max_lo, max_hi)


def hist_quantile(cumulative: dict[float, float], q: float) -> float | None:
    """Prometheus' histogram_quantile on one set of cumulative buckets."""
    bounds = sorted(cumulative)
    if not bounds:
        return None
    total = cumulative[bounds[-1]]
    if total <= 0:
        return None
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le in bounds:
        c = cumulative[le]
        if c >= rank:
            if le == math.inf:
                return prev_le
            if c == prev_c:
                return le
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return prev_le


def lag_by_worker(after: Samples, before: Samples | None) -> dict[str, HistSummary]:
    a = buckets_by(after, LAG, "worker")
    b = buckets_by(before, LAG, "worker") if before is not None else {}
    return {w: summarize(delta(a[w], b.get(w))) for w in sorted(a)}


def lag_timeline(snaps: list[Snapshot], since: float) -> dict[str, list[dict[str, Any]]]:
    """Per worker and scrape interval: lag p50 / p99 / max range of the samples in it."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for prev, cur in zip(snaps, snaps[1:], strict=False):
        for worker, s in lag_by_worker(cur.samples, prev.samples).items():
            if s.count:
                out[worker].append({"at": round(cur.at - since, 3), **s.as_dict()})
    return dict(out)


def series_sum(samples: Samples, name: str, by: str | None = None,
               **match: str) -> dict[str, float]:
    """Sum of ``name``'s samples whose labels include ``match``, grouped by label ``by``."""
    out: dict[str, float] = defaultdict(float)
    for (sample, labels), v in samples.items():
        if sample != name:
            continue
        d = dict(labels)
        if all(d.get(k) == val for k, val in match.items()):
            out[d.get(by, "") if by else "all"] += v
    return dict(out)


def present(samples: Samples, names: Iterable[str]) -> bool:
    wanted = set(names)
    return any(k[0] in wanted for k in samples)


def counter_delta(after: Samples, before: Samples, name: str,
                  by: str | None = None) -> dict[str, float]:
    a, b = series_sum(after, name, by), series_sum(before, name, by)
    return {k: max(0.0, v - b.get(k, 0.0)) for k, v in sorted(a.items())}


def claims_delta(after: Samples, before: Samples) -> dict[str, Any]:
    """The claim protocol between two scrapes; ``half_finished`` is started minus ended.

    A job cancelled before it started also ends (``cancelled``), so the difference can
    only under-count; it is never negative.
    """
    started = counter_delta(after, before, "corevo_claim_start_total", "outcome")
    terminal = counter_delta(after, before, "corevo_job_terminal_total", "state")
    return {
        "won": counter_delta(after, before, "corevo_claim_total", "outcome").get("won", 0.0),
        "started": started.get("started", 0.0), "fenced": started.get("fenced", 0.0),
        "terminal": terminal,
        "reclaimed": sum(counter_delta(after, before, "corevo_claim_reclaimed_total").values()),
        "events": counter_delta(after, before, "corevo_events_projected_total", "outcome"),
        "half_finished": max(0.0, started.get("started", 0.0) - sum(terminal.values())),
    }


def gauge_timeline(snaps: list[Snapshot], since: float, name: str,
                   by: str) -> dict[str, list[tuple[float, float]]]:
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for snap in snaps:
        for key, v in series_sum(snap.samples, name, by).items():
            out[key].append((round(snap.at - since, 3), v))
    return dict(out)


def stage_histograms(after: Samples, before: Samples) -> dict[str, dict[str, Any]]:
    """The run's four stage histograms (all kinds together), plus per-kind counts."""
    out: dict[str, dict[str, Any]] = {}
    for stage in STAGES:
        name = f"corevo_task_{stage}_seconds"
        total = delta(buckets_by(after, name, None).get("all", {}),
                      buckets_by(before, name, None).get("all"))
        a_kinds, b_kinds = buckets_by(after, name, "kind"), buckets_by(before, name, "kind")
        kinds = {k: summarize(delta(v, b_kinds.get(k))).as_dict() for k, v in a_kinds.items()}
        out[stage] = {
            "buckets": [[le if math.isfinite(le) else "+Inf", round(c)]
                        for le, c in sorted(total.items())],
            "summary": summarize(total).as_dict() if total else HistSummary(
                0, None, None, None, None).as_dict(),
            "by_kind": {k: v for k, v in sorted(kinds.items()) if v["count"]},
        }
    return out
