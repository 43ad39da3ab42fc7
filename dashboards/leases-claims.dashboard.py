"""Leases and claims: held vs limit, outcomes, ghosts, lost heartbeats, fencing, queue wait."""

from corevo_obs.tooling.grafana.panels import dashboard, gauges, quantiles, rates

dashboard = dashboard(
    "corevo / leases and claims", "corevo-leases-claims",
    [
        ("Leases", [
            gauges("corevo_lease_held", "corevo_lease_limit", title="leases held vs limit"),
            rates("corevo_lease_acquire_total", title="acquire by outcome"),
            rates("corevo_lease_reaped_total", title="ghost holders reaped"),
            rates("corevo_lease_heartbeat_total", title="heartbeats by outcome (lost!)"),
            rates("corevo_lease_release_total", title="releases by outcome (noop = double)"),
            quantiles("corevo_lease_acquire_seconds", title="acquire round trip"),
            quantiles("corevo_lease_hold_seconds", title="hold time"),
            gauges("corevo_lease_oldest_heartbeat_age_seconds", title="stalest holder heartbeat"),
            gauges("corevo_lease_orphaned_holders", title="orphaned holders"),
        ]),
        ("Lease backend: shards, replicas, breaker", [
            rates("corevo_lease_stranded_total",
                  title="sharded: rejected while another shard had room"),
            rates("corevo_lease_rebalanced_total", title="sharded: slots of limit moved"),
            gauges("corevo_lease_buffered",
                   title="lease buffer: slots held unused (unavailable to other workers)"),
            rates("corevo_lease_buffer_total",
                  title="lease buffer: hits (no round trip), kept, released, idle, lost"),
            rates("corevo_lease_replica_wait_timeouts_total",
                  title="grants/renewals no replica confirmed (WAIT timeout)"),
            gauges("corevo_breaker_state", title="breaker state (0 closed, 1 half-open, 2 open)"),
            rates("corevo_breaker_transitions_total", title="breaker transitions"),
            rates("corevo_breaker_short_circuited_total",
                  title="calls short-circuited (backend down)"),
            rates("corevo_lease_fail_open_total", title="fail-open grants (limit not held!)"),
        ]),
        ("Claims", [
            rates("corevo_claim_total", title="claims by outcome"),
            rates("corevo_claim_start_total", title="starts by outcome (fenced = stale owner)"),
            quantiles("corevo_claim_queue_wait_seconds", title="queue wait"),
            quantiles("corevo_claim_to_start_seconds", title="claimed to started"),
            rates("corevo_claim_reclaimed_total", title="reclaimed before start"),
            rates("corevo_job_terminal_total", title="terminal states"),
            rates("corevo_job_dispatch_path_total", title="local fast path vs queued"),
            rates("corevo_job_finish_errors_total",
                  title="finishes the database never took (job left running)"),
            gauges("corevo_job_running_oldest_seconds",
                   title="oldest job in running, per table (read by recover())"),
        ]),
    ],
)
