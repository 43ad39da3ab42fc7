"""Event projection, cancel and command routing, and the suite's own health."""

from corevo_obs.dashboards.panels import dashboard, default_panels

dashboard = dashboard(
    "corevo / events, cancel, self-health", "corevo-events-cancel-self",
    [
        ("Event projection", default_panels("events")),
        ("Cancel and commands", default_panels("cancel")),
        ("Suite health", default_panels("self")),
    ],
)
