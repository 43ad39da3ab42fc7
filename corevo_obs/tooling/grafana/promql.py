"""PromQL for catalog metrics, one builder per metric kind, and a small expression reader.

Pure strings, no grafanalib: dashboards, alert checks and the end-to-end test share it.
Queries select with Grafana's ``$job``/``$worker`` variables and ``$__rate_interval``;
``concrete()`` swaps them for values so a bare Prometheus can evaluate the same text.

>>> from corevo_obs.core.catalog import spec
>>> quantile(spec("corevo_event_loop_lag_seconds"), 0.99)  # doctest: +ELLIPSIS
'histogram_quantile(0.99, sum by (le, worker) (rate(corevo_event_loop_lag_seconds_bucket{...
"""

from __future__ import annotations

import re
from typing import Final

from ...core.catalog import MetricSpec
from ...core.errors import CatalogError

__all__ = [
    "PROMQL_BUILTIN_METRICS",
    "concrete",
    "counter_rate",
    "gauge",
    "heartbeat_age",
    "metric_names",
    "quantile",
    "ratio",
    "selector",
]

RATE: Final = "$__rate_interval"
#: Series Prometheus makes itself (not in the catalog, but fine to query).
PROMQL_BUILTIN_METRICS: Final = frozenset({"up", "scrape_duration_seconds"})


def selector(s: MetricSpec, sample: str | None = None, **match: str) -> str:
    """``name{job=~"$job",worker=~"$worker",...}``: worker only where the metric has it."""
    parts = ['job=~"$job"']
    if "worker" in s.labels:
        parts.append('worker=~"$worker"')
    parts += [f'{k}="{v}"' for k, v in match.items()]
    return f"{sample or s.name}{{{','.join(parts)}}}"


def _by(labels: tuple[str, ...]) -> str:
    return ", ".join(labels)


def quantile(s: MetricSpec, q: float, *, by: tuple[str, ...] = ("worker",)) -> str:
    """Per-``by`` quantile of a histogram over the rate interval."""
    if s.kind != "histogram":
        raise CatalogError(f"{s.name} is a {s.kind}, not a histogram")
    keep = tuple(lb for lb in by if lb in s.labels)
    inner = f"rate({selector(s, f'{s.name}_bucket')}[{RATE}])"
    return f"histogram_quantile({q}, sum by ({_by(('le', *keep))}) ({inner}))"


def counter_rate(s: MetricSpec, *, by: tuple[str, ...] | None = None, **match: str) -> str:
    """Per-second rate of a counter (or a histogram's ``_count``), split by its labels."""
    if s.kind == "gauge":
        raise CatalogError(f"{s.name} is a gauge; rate() needs a counter")
    sample = f"{s.name}_count" if s.kind == "histogram" else s.name
    keep = s.labels if by is None else by
    inner = f"rate({selector(s, sample, **match)}[{RATE}])"
    return f"sum by ({_by(keep)}) ({inner})" if keep else f"sum({inner})"


def gauge(s: MetricSpec, *, agg: str = "max") -> str:
    """A gauge per label set, aggregated with ``max`` (never ``avg``) across targets."""
    if s.kind != "gauge":
        raise CatalogError(f"{s.name} is a {s.kind}, not a gauge")
    return f"{agg} by ({_by(s.labels)}) ({selector(s)})" if s.labels else f"{agg}({selector(s)})"


def heartbeat_age(s: MetricSpec) -> str:
    """Seconds since a timestamp gauge last moved: grows while a loop is frozen."""
    return f"time() - {gauge(s)}"


def ratio(num: MetricSpec, den: MetricSpec) -> str:
    """``num / den`` per shared labels, e.g. leases held over limit."""
    return f"{gauge(num)} / {gauge(den)}"


_VARS = re.compile(r"\$(__rate_interval|job|worker)\b|\$\{(job|worker)\}")


def concrete(expr: str, *, rate_interval: str = "5s", job: str = ".+", worker: str = ".+") -> str:
    """The query with Grafana variables replaced, ready for Prometheus' HTTP API."""
    values = {"__rate_interval": rate_interval, "job": job, "worker": worker}
    return _VARS.sub(lambda m: values[m.group(1) or m.group(2)], expr)


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_COMMENT = re.compile(r"#[^\n]*")
_BRACES = re.compile(r"\{[^{}]*\}|\[[^\[\]]*\]")
_GROUPING = re.compile(
    r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE
)
_IDENT = re.compile(r"(?<![\w:.$])([A-Za-z_:][\w:]*)(?!\w)(\s*\()?")
_KEYWORDS: Final = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
     "and", "or", "unless", "inf", "nan", "atan2"}
)


def metric_names(expr: str) -> set[str]:
    """Metric names an expression selects (functions, keywords and labels left out)."""
    text = _COMMENT.sub(" ", _STRINGS.sub('""', expr))
    text = _BRACES.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    names = set()
    for m in _IDENT.finditer(text):
        ident, call = m.group(1), m.group(2)
        if call or ident.lower() in _KEYWORDS:
            continue
        names.add(ident)
    return names
