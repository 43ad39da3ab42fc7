"""Loop health: per-worker lag, the frozen-now heartbeat age, stalls (failure class 1)."""

from grafanalib.core import TimeSeries

from corevo_obs.core.catalog import spec
from corevo_obs.tooling.grafana import promql
from corevo_obs.tooling.grafana.panels import (
    dashboard,
    gauges,
    heartbeat_age,
    increases,
    quantiles,
    rates,
    timeseries,
    worst_quantile,
)


def utilization() -> TimeSeries:
    """Busy seconds per second: the loop's utilization, 0..1 per job and worker."""
    s = spec("corevo_event_loop_busy_seconds_total")
    return timeseries("loop utilization (busy share of wall time)",
                      [(promql.counter_rate(s, by=("job", "worker")), "{{job}} {{worker}}")],
                      unit="percentunit", description=s.help)


dashboard = dashboard(
    "corevo / loop health", "corevo-loop-health",
    [
        ("Now", [gauges("corevo_event_loop_stall_in_progress_seconds",
                        title="stall in progress (frozen now)"),
                 heartbeat_age(), worst_quantile("corevo_event_loop_lag_seconds")]),
        ("Lag", [quantiles("corevo_event_loop_lag_seconds", title="loop lag per worker"),
                 rates("corevo_event_loop_lag_seconds", title="lag samples per second")]),
        ("Utilization", [utilization()]),
        ("Stalls", [rates("corevo_event_loop_stalls_total", title="stalls per second"),
                    quantiles("corevo_event_loop_stall_seconds", title="stall duration"),
                    rates("corevo_event_loop_stalls_by_cause_total",
                          title="stalls per second by cause"),
                    increases("corevo_worker_killed_total", "15m",
                              title="workers killed in the last 15 minutes (timeout: frozen)"),
                    gauges("corevo_worker_killed_stall_seconds",
                           title="last kill per worker: stall age at the kill, line, cause")]),
    ],
    description="One frozen worker of many shows here: every panel is per job and worker "
                "(two services may both have a w1), or the worst worker per job.",
)
