"""Scrape a worker's endpoint the way Prometheus would, while its loop may be frozen.

The endpoint runs on its own thread, so it answers during a freeze; the heartbeat gauge
it serves is what the "loop frozen now" alert reads: its age grows while nothing runs.
"""

from __future__ import annotations

import time
import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

HEARTBEAT = "corevo_event_loop_heartbeat_timestamp_seconds"


def heartbeat_age(port: int, worker: str, *, timeout: float = 1.0) -> float | None:
    """Seconds since ``worker``'s loop last ran, per one scrape; None if unavailable."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
            text = r.read().decode()
    except OSError:
        return None
    now = time.time()
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == HEARTBEAT and s.labels.get("worker") == worker:
                return max(0.0, now - s.value)
    return None


@dataclass
class HeartbeatWatch:
    """The largest heartbeat age seen over repeated scrapes, and how many were answered
    while the loop was frozen (age above ``frozen_after``)."""

    port: int
    worker: str
    max_age: float = 0.0
    scrapes: int = 0
    answered_frozen: int = 0
    frozen_after: float = 0.1

    def poll(self) -> None:
        self.scrapes += 1
        age = heartbeat_age(self.port, self.worker)
        if age is not None:
            self.answered_frozen += age > self.frozen_after
            self.max_age = max(self.max_age, age)
