"""Drill 2: a long task pins the connection's worker; where does the next task run?

The orchestrator plays the client: on one connection to the gateway it sends a long
task, then a short one. Phase ``local`` keeps execution on the connection's worker, so
the short task waits behind the long one; phase ``claim`` turns it into a durable job
that an idle executor claims (conditional update, owner/epoch/token) and runs. Either
way the gateway streams the task's events back on the same connection.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

from .context import DemoContext
from .metrics_read import counter_by, stage_summary

REPLY_TIMEOUT = 60.0


def _phase(port: int, path: str, long_s: float, short_s: float, gap: float) -> list[dict[str, Any]]:
    """Send both tasks on one connection; read their events and replies as they stream."""
    tasks: list[dict[str, Any]] = [
        {"task": f"{path}-long", "kind": "long", "seconds": long_s, "path": path},
        {"task": f"{path}-short", "kind": "short", "seconds": short_s, "path": path},
    ]
    sent: dict[str, float] = {}
    first: dict[str, float] = {}
    replies: dict[str, dict[str, Any]] = {}
    with socket.create_connection(("127.0.0.1", port), timeout=REPLY_TIMEOUT) as conn:
        for i, task in enumerate(tasks):
            if i:
                time.sleep(gap)
            sent[task["task"]] = time.monotonic()
            conn.sendall(json.dumps(task).encode() + b"\n")
        lines = conn.makefile("r")
        while len(replies) < len(tasks):
            line = lines.readline()
            if not line:
                raise OSError("connection closed before both replies")
            msg = json.loads(line)
            name = msg["task"]
            if msg.get("event") == "token":
                first[name] = round(time.monotonic() - sent[name], 4)
            elif "error" in msg:
                raise ValueError(f"{name}: {msg['error']}")
            elif "event" not in msg:
                replies[name] = {**msg, "first_event_at_client_seconds": first.get(name)}
    return [replies[t["task"]] for t in tasks]  # long, then short


def run(ctx: DemoContext) -> dict[str, Any]:
    long_s, short_s, gap = (1.5, 0.2, 0.3) if ctx.short else (4.0, 0.5, 0.5)
    ctx.progress.step(f"sticky connection (a {long_s:.1f}s task, then a {short_s:.1f}s one "
                      "on the same connection)")
    db = str(ctx.workdir / "jobs.db")
    gateway = ctx.children.spawn("w0", "--role", "gateway", "--db", db, *ctx.port_args(0))
    idle = [ctx.children.spawn(f"w{i}", "--role", "executor", "--db", db, *ctx.port_args(i))
            for i in range(1, ctx.workers)]
    port = int(ctx.children.ready(gateway)["port"])
    for c in idle:
        ctx.children.ready(c)
    phases: dict[str, list[dict[str, Any]]] = {}
    for path, label in (("local", "local-only path"), ("claim", "global claim")):
        ctx.progress.status(f"{label}: sending both tasks to w0")
        try:
            phases[path] = _phase(port, path, long_s, short_s, gap)
        except (OSError, ValueError) as exc:
            raise gateway.failed(f"failed on its connection ({exc})") from None
        short = phases[path][1]
        ctx.progress.event(f"{label}: short task ran on {short['executed_by']}, dispatch "
                           f"{short['dispatch_seconds']:.3f}s")
    ctx.children.stop([gateway, *idle])
    local_short, claim_short = phases["local"][1], phases["claim"][1]
    mp = ctx.workdir / "metrics"
    result = {
        "gateway_worker": gateway.name,
        "idle_workers": [c.name for c in idle],
        "long_seconds": long_s,
        "short_seconds": short_s,
        "phases": phases,
        "short_task_owner": {"local": local_short["executed_by"],
                             "claim": claim_short["executed_by"]},
        "short_dispatch_seconds": {"local": local_short["dispatch_seconds"],
                                   "claim": claim_short["dispatch_seconds"]},
        "stage_histograms": stage_summary(mp),
        "claims": counter_by(mp, "corevo_claim_total", "worker", "outcome"),
        "dispatch_paths": counter_by(mp, "corevo_job_dispatch_path_total", "worker", "path"),
        "events": counter_by(mp, "corevo_events_projected_total", "worker", "outcome"),
    }
    ctx.progress.done(f"claimed by idle {claim_short['executed_by']}")
    return result
