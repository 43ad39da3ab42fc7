"""Task stages: the four intervals of one task side by side, p50/p95/p99 per job and host
(a host may serve these histograms summed over its workers: see promql.per_host)."""

from corevo_obs.tooling.grafana.panels import dashboard, quantiles, rates

STAGES = (
    "corevo_task_dispatch_seconds",
    "corevo_task_first_event_seconds",
    "corevo_task_external_seconds",
    "corevo_task_total_seconds",
)

dashboard = dashboard(
    "corevo / task stages", "corevo-task-stages",
    [
        ("Four intervals", [quantiles(name) for name in STAGES]),
        ("Outcomes", [
            rates("corevo_task_total_seconds", by=("outcome",),
                  title="tasks finished per second by outcome"),
            rates("corevo_task_mark_errors_total"),
            rates("corevo_task_unrouted_total",
                  title="requests with no route template (no_router: set route_of=)"),
        ]),
    ],
    description="Dispatch high while external is low: work is queued on a busy worker.",
)
