"""Scrape a worker's endpoint the way Prometheus would, while its loop may be frozen.

The endpoint runs on its own thread, so it answers during a freeze; in multiprocess mode
it serves every worker's heartbeat gauge (one series per ``worker`` label), which is what
the "loop frozen now" alert reads: a gauge whose age grows while that loop runs nothing.
"""

from __future__ import annotations

import time
import urllib.request
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

HEARTBEAT = "corevo_event_loop_heartbeat_timestamp_seconds"


def heartbeat_ages(port: int, *, timeout: float = 1.0) -> dict[str, float] | None:
    """Seconds since each worker's loop last ran, per one scrape; None if no answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
            text = r.read().decode()
    except OSError:
        return None
    now = time.time()
    return {s.labels["worker"]: max(0.0, now - s.value)
            for fam in text_string_to_metric_families(text) for s in fam.samples
            if s.name == HEARTBEAT and "worker" in s.labels}


@dataclass
class HeartbeatWatch:
    """Per worker, the largest heartbeat age seen over repeated scrapes of one endpoint,
    and how many answered scrapes showed that worker frozen (age above ``frozen_after``)."""

    port: int
    frozen_after: float = 0.1
    scrapes: int = 0
    max_age: dict[str, float] = field(default_factory=dict)
    answered_frozen: dict[str, int] = field(default_factory=dict)

    def poll(self) -> None:
        self.scrapes += 1
        for worker, age in (heartbeat_ages(self.port) or {}).items():
            self.max_age[worker] = max(self.max_age.get(worker, 0.0), age)
            if age > self.frozen_after:
                self.answered_frozen[worker] = self.answered_frozen.get(worker, 0) + 1
