"""PromQL for catalog metrics, one builder per metric kind, and a small expression reader.

Pure strings, no grafanalib: dashboards, alert checks and the end-to-end test share it.
Queries select with Grafana's ``$job``/``$worker`` variables and ``$__rate_interval``;
``concrete()`` swaps them for values so a bare Prometheus can evaluate the same text.

Every query keeps its series apart by whose they are (``identity``): the ``job`` and the
``worker`` (two services both have a ``w1``), or the ``instance`` for a series that is
per host (a quota's held count, the task-stage histograms a host may serve summed over
its workers).

>>> from corevo_obs.core.catalog import spec
>>> quantile(spec("corevo_event_loop_lag_seconds"), 0.99)  # doctest: +ELLIPSIS
'histogram_quantile(0.99, sum by (le, job, worker) (rate(corevo_event_loop_lag_seconds_bucket{...
"""

from __future__ import annotations

import re
from typing import Final

from ...core.catalog import MetricSpec
from ...core.errors import CatalogError

__all__ = [
    "PROMQL_BUILTIN_METRICS",
    "concrete",
    "counter_increase",
    "counter_rate",
    "gauge",
    "heartbeat_age",
    "identity",
    "kept_apart",
    "metric_names",
    "per_host",
    "quantile",
    "ratio",
    "selector",
]

RATE: Final = "$__rate_interval"
#: Series Prometheus makes itself (not in the catalog, but fine to query).
PROMQL_BUILTIN_METRICS: Final = frozenset({"up", "scrape_duration_seconds"})


def per_host(s: MetricSpec) -> bool:
    """Whether a host may serve ``s`` summed over its workers, without ``worker``: the
    task-stage histograms (the gunicorn host endpoint's cost grows with workers x kinds x
    buckets). Their panels group by ``instance``, never filter by ``worker``."""
    return s.group == "stages" and s.kind == "histogram"


def identity(s: MetricSpec) -> tuple[str, ...]:
    """Whose series: ``(job, worker)`` for a per-process series, else ``(job, instance)``."""
    if "worker" in s.labels and not per_host(s):
        return ("job", "worker")
    return ("job", "instance")


def kept_apart(s: MetricSpec, by: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """The labels a query of ``s`` keeps apart: ``identity`` first, then those of its
    labels to split by (default: all of them)."""
    own = identity(s)
    rest = s.labels if by is None else by
    return own + tuple(lb for lb in rest
                       if lb in s.labels and lb not in own and lb not in ("job", "worker"))


def selector(s: MetricSpec, sample: str | None = None, **match: str) -> str:
    """``name{job=~"$job",worker=~"$worker",...}``: worker only where the series has it."""
    parts = ['job=~"$job"']
    if identity(s)[1] == "worker":
        parts.append('worker=~"$worker"')
    parts += [f'{k}="{v}"' for k, v in match.items()]
    return f"{sample or s.name}{{{','.join(parts)}}}"


def _by(labels: tuple[str, ...]) -> str:
    return ", ".join(labels)


def quantile(s: MetricSpec, q: float, *, by: tuple[str, ...] = ()) -> str:
    """Quantile of a histogram over the rate interval, per job and worker (or instance),
    and per ``by`` label."""
    if s.kind != "histogram":
        raise CatalogError(f"{s.name} is a {s.kind}, not a histogram")
    inner = f"rate({selector(s, f'{s.name}_bucket')}[{RATE}])"
    return f"histogram_quantile({q}, sum by ({_by(('le', *kept_apart(s, by)))}) ({inner}))"


def _counter(s: MetricSpec, fn: str, window: str, by: tuple[str, ...] | None,
             match: dict[str, str]) -> str:
    if s.kind == "gauge":
        raise CatalogError(f"{s.name} is a gauge; {fn}() needs a counter")
    sample = f"{s.name}_count" if s.kind == "histogram" else s.name
    return f"sum by ({_by(kept_apart(s, by))}) ({fn}({selector(s, sample, **match)}[{window}]))"


def counter_rate(s: MetricSpec, *, by: tuple[str, ...] | None = None, **match: str) -> str:
    """Per-second rate of a counter (or a histogram's ``_count``), per job and worker (or
    instance), split by its labels (or ``by``)."""
    return _counter(s, "rate", RATE, by, match)


def counter_increase(s: MetricSpec, window: str, *, by: tuple[str, ...] | None = None,
                     **match: str) -> str:
    """Events in the last ``window``, like ``counter_rate``: for rare events (a kill), which
    a per-second rate shows as a blip; the counter exists at 0, so the first one shows."""
    return _counter(s, "increase", window, by, match)


def gauge(s: MetricSpec, *, agg: str = "max") -> str:
    """A gauge per job and worker (or instance) and label set, aggregated with ``max``
    (never ``avg``) across targets."""
    if s.kind != "gauge":
        raise CatalogError(f"{s.name} is a {s.kind}, not a gauge")
    return f"{agg} by ({_by(kept_apart(s, None))}) ({selector(s)})"


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
