"""Read the demo's metrics back from the multiprocess directory, as a scrape would.

The report quotes the same series a Prometheus would see, including those written by
processes that have exited (or were SIGKILLed): counters and histograms outlive them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, cast

from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

STAGES: Final = ("dispatch", "first_event", "external", "total")


def _families(mp: Path) -> dict[str, Any]:
    reg = CollectorRegistry()
    # prometheus_client leaves the constructor (registry, path) unannotated; it registers
    new = cast("Callable[[CollectorRegistry, str], MultiProcessCollector]", MultiProcessCollector)
    new(reg, str(mp))
    return {fam.name: fam for fam in reg.collect()}


def counter_by(mp: Path, name: str, *labels: str) -> dict[str, int]:
    """A counter summed by the given labels (``"w1/won"`` keys), zero series left out."""
    fam = _families(mp).get(name.removesuffix("_total"))
    out: dict[str, int] = defaultdict(int)
    for s in fam.samples if fam else ():
        if s.name == name:
            out["/".join(s.labels.get(k, "") for k in labels)] += int(s.value)
    return {k: v for k, v in sorted(out.items()) if v}


def counter_total(mp: Path, name: str) -> int:
    """A counter summed over every series."""
    return sum(counter_by(mp, name).values())


def stage_summary(mp: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """``{stage: {"worker/kind": {"count": n, "sum_seconds": s}}}`` for the four stages."""
    fams = _families(mp)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for stage in STAGES:
        fam = fams.get(f"corevo_task_{stage}_seconds")
        rows: dict[str, dict[str, Any]] = defaultdict(lambda: {"count": 0, "sum_seconds": 0.0})
        for s in fam.samples if fam else ():
            key = f"{s.labels.get('worker')}/{s.labels.get('kind')}"
            if s.name.endswith("_count"):
                rows[key]["count"] += int(s.value)
            elif s.name.endswith("_sum"):
                rows[key]["sum_seconds"] = round(rows[key]["sum_seconds"] + s.value, 4)
        out[stage] = dict(sorted(rows.items()))
    return out
