"""``corevo-obs loadtest``: the design's validation workload against the user's own app.

An application of the suite (like the demo): it serves the app in worker processes
(or drives one already running on loopback), points its outgoing calls at a
fixed-latency upstream, runs a seeded, bounded mix of requests, reads the suite's own
metrics while the load runs and judges the five observations against budgets. Nothing
in the library imports it. See docs/loadtest.md.
"""
