"""Event projection, cancel and command routing, and the suite's own health."""

from corevo_obs.tooling.grafana.panels import dashboard, gauges, quantiles, rates

dashboard = dashboard(
    "corevo / events, cancel, self-health", "corevo-events-cancel-self",
    [
        ("Event projection", [
            rates("corevo_events_projected_total",
                  title="events projected by outcome (stale_epoch = old generation)"),
            rates("corevo_events_replayed_total", title="events replayed from history"),
        ]),
        ("Cancel and commands", [
            rates("corevo_cancel_requested_total", title="cancels requested"),
            rates("corevo_cancel_delivered_total",
                  title="cancels delivered by path (marker, lease_expiry = wake-up missed)"),
            quantiles("corevo_cancel_latency_seconds", by=("path",),
                      title="cancel request to stop, per path"),
            rates("corevo_command_routed_total",
                  title="commands by outcome (fenced = stale generation)"),
            rates("corevo_late_side_effects_total",
                  title="late side effects (writes after a cancel was acknowledged)"),
        ]),
        ("Suite health", [
            rates("corevo_instrumentation_errors_total",
                  title="instrumentation errors by component"),
            gauges("corevo_metrics_dir_files", "corevo_metrics_dir_dead_writers",
                   title="metrics directory: files vs dead writers"),
            rates("corevo_metrics_compactions_total", title="compactions of dead writers"),
            gauges("corevo_metrics_last_compaction_seconds", title="last compaction duration"),
        ]),
    ],
)
