"""grafanalib panel builders over catalog specs: one place decides how a metric is charted.

Only dashboard-building code imports this module (grafanalib is an optional extra).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

import attr
from grafanalib.core import (
    Dashboard,
    GridPos,
    RowPanel,
    Target,
    Template,
    Templating,
    Time,
    TimeSeries,
)

from ...core.catalog import MetricSpec, spec, specs
from . import promql

DATASOURCE: Final = "${datasource}"
QUANTILES: Final = (0.5, 0.95, 0.99)
WIDTH: Final = 12
HEIGHT: Final = 8

Query = tuple[str, str]  # (PromQL, legend)


def _unit(s: MetricSpec) -> str:
    if s.kind == "counter":
        return "ops"
    return "s" if s.name.endswith("_seconds") else "short"


def timeseries(
    title: str, queries: Sequence[Query], *, unit: str = "short", description: str = ""
) -> TimeSeries:
    """A time-series panel; each query gets its own refId and legend."""
    targets = [
        Target(expr=expr, legendFormat=legend, refId=chr(ord("A") + i), datasource=DATASOURCE)
        for i, (expr, legend) in enumerate(queries)
    ]
    return TimeSeries(
        title=title, targets=targets, unit=unit, description=description or None,
        dataSource=DATASOURCE,
    )


def _legend(labels: Iterable[str]) -> str:
    return " ".join(f"{{{{{lb}}}}}" for lb in labels) or "all"


def quantiles(name: str, qs: Sequence[float] = QUANTILES, *, by: tuple[str, ...] = (),
              title: str | None = None) -> TimeSeries:
    """p50/p95/p99 (by default) of a histogram, one line per job, worker (or instance),
    ``by`` label and quantile."""
    s = spec(name)
    legend = _legend(promql.kept_apart(s, by))
    queries = [(promql.quantile(s, q, by=by), f"p{round(q * 100)} {legend}") for q in qs]
    return timeseries(title or s.name, queries, unit="s", description=s.help)


def worst_quantile(name: str, q: float = 0.99, *, title: str | None = None) -> TimeSeries:
    """The worst worker's quantile per job: ``max`` across workers, so one bad worker shows."""
    s = spec(name)
    expr = f"max by (job) ({promql.quantile(s, q)})"
    return timeseries(title or f"worst worker p{round(q * 100)}: {s.name}",
                      [(expr, f"{{{{job}}}} max p{round(q * 100)}")], unit="s",
                      description=s.help)


def rates(name: str, *, by: tuple[str, ...] | None = None, title: str | None = None,
          **match: str) -> TimeSeries:
    """Per-second rate of a counter (or a histogram's observations), per job and worker
    (or instance), split by its labels (or ``by``)."""
    s = spec(name)
    return timeseries(title or s.name, [(promql.counter_rate(s, by=by, **match),
                                         _legend(promql.kept_apart(s, by)))],
                      unit="ops", description=s.help)


def increases(name: str, window: str, *, by: tuple[str, ...] | None = None,
              title: str | None = None) -> TimeSeries:
    """Events in the last ``window`` (rare events: a kill shows from the first one)."""
    s = spec(name)
    return timeseries(title or s.name, [(promql.counter_increase(s, window, by=by),
                                         _legend(promql.kept_apart(s, by)))],
                      unit="short", description=s.help)


def gauges(*names: str, title: str | None = None) -> TimeSeries:
    """One or more gauges on a shared axis (e.g. held vs limit), max across targets."""
    ss = [spec(n) for n in names]
    queries = [(promql.gauge(s), f"{s.name.removeprefix('corevo_')} "
                                 f"{_legend(promql.kept_apart(s))}") for s in ss]
    return timeseries(title or " vs ".join(s.name for s in ss), queries, unit=_unit(ss[0]),
                      description=" / ".join(s.help for s in ss))


def heartbeat_age(name: str = "corevo_event_loop_heartbeat_timestamp_seconds") -> TimeSeries:
    s = spec(name)
    return timeseries("heartbeat age (frozen now)",
                      [(promql.heartbeat_age(s), _legend(promql.kept_apart(s)))],
                      unit="s", description=s.help)


def default_panels(group: str) -> list[TimeSeries]:
    """A sensible panel per metric of a catalog group, chosen by kind."""
    out: list[TimeSeries] = []
    for s in specs(group):
        if s.kind == "histogram":
            out.append(quantiles(s.name))
        elif s.kind == "counter":
            out.append(rates(s.name))
        else:
            out.append(gauges(s.name))
    return out


def _templating(anchor: str) -> Templating:
    job = f"label_values({anchor}, job)"
    worker = f'label_values({anchor}{{job=~"$job"}}, worker)'
    common: dict[str, Any] = {"includeAll": True, "multi": True, "allValue": ".+",
                              "dataSource": DATASOURCE, "default": "$__all"}
    return Templating(list=[
        Template(name="datasource", query="prometheus", type="datasource", default="Prometheus"),
        Template(name="job", query=job, label="job", **common),
        Template(name="worker", query=worker, label="worker", **common),
    ])


def dashboard(title: str, uid: str, sections: Sequence[tuple[str, Sequence[TimeSeries]]], *,
              description: str = "",
              anchor: str = "corevo_event_loop_heartbeat_timestamp_seconds") -> Dashboard:
    """Rows of panels, two per line, with datasource/job/worker variables."""
    laid_out: list[Any] = []
    y = 0
    for row_title, row_panels in sections:
        laid_out.append(RowPanel(title=row_title, gridPos=GridPos(h=1, w=24, x=0, y=y)))
        y += 1
        for i, p in enumerate(row_panels):
            x = (i % 2) * WIDTH
            laid_out.append(attr.evolve(p, gridPos=GridPos(h=HEIGHT, w=WIDTH, x=x, y=y)))
            if x:
                y += HEIGHT
        if len(row_panels) % 2:
            y += HEIGHT
    return Dashboard(
        title=title, uid=uid, description=description, tags=["corevo-obs"],
        panels=laid_out, templating=_templating(anchor), time=Time("now-1h", "now"),
        refresh="30s", schemaVersion=36,
    ).auto_panel_ids()
