"""Loop health: per-worker lag, the frozen-now heartbeat age, stalls (failure class 1)."""

from corevo_obs.tooling.grafana.panels import (
    dashboard,
    gauges,
    heartbeat_age,
    quantiles,
    rates,
    worst_quantile,
)

dashboard = dashboard(
    "corevo / loop health", "corevo-loop-health",
    [
        ("Now", [gauges("corevo_event_loop_stall_in_progress_seconds",
                        title="stall in progress (frozen now)"),
                 heartbeat_age(), worst_quantile("corevo_event_loop_lag_seconds")]),
        ("Lag", [quantiles("corevo_event_loop_lag_seconds", title="loop lag per worker"),
                 rates("corevo_event_loop_lag_seconds", title="lag samples per second")]),
        ("Stalls", [rates("corevo_event_loop_stalls_total", title="stalls per second"),
                    quantiles("corevo_event_loop_stall_seconds", title="stall duration"),
                    rates("corevo_event_loop_stalls_by_cause_total",
                          title="stalls per second by cause"),
                    rates("corevo_worker_killed_total",
                          title="workers killed per second by reason")]),
    ],
    description="One frozen worker of many shows here: every panel is per worker or max.",
)
