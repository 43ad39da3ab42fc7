"""Offload adapters: slots in use vs limit, waiters, slot wait, run time, rejections, sunk."""

from corevo_obs.tooling.grafana.panels import dashboard, gauges, quantiles, rates

dashboard = dashboard(
    "corevo / offload", "corevo-offload",
    [
        ("Slots", [
            gauges("corevo_offload_in_flight", "corevo_offload_limit",
                   title="in flight vs limit"),
            gauges("corevo_offload_waiting", title="callers waiting for a slot"),
            quantiles("corevo_offload_slot_wait_seconds", by=("adapter",),
                      title="slot wait"),
            quantiles("corevo_offload_duration_seconds", by=("adapter",),
                      title="thread run time"),
        ]),
        ("Failures", [
            rates("corevo_offload_duration_seconds", by=("adapter", "outcome"),
                  title="operations by outcome"),
            rates("corevo_offload_rejected_total", title="rejections by reason"),
            rates("corevo_offload_sunk_slots_total", title="sunk slots (given up for good)"),
            rates("corevo_offload_errors_total", title="background errors"),
        ]),
    ],
)
