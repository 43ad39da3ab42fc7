"""Keep instrumentation failures away from the host: count them, log once, go on.

An exporter, Redis or metrics-dir failure must never surface in a user's task. Each
component logs its first failure at WARNING and later ones at DEBUG, and every failure
increments ``corevo_instrumentation_errors_total{component}`` when that itself works.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry

from .untrusted import printable

if TYPE_CHECKING:
    from .telemetry import Telemetry

log = logging.getLogger("corevo_obs")
_seen: set[str] = set()
_lock = threading.Lock()


def _forked() -> None:
    """A forked child (a gunicorn worker) is a process of its own: its first failure of
    each component gets its line, even when its parent had logged that component's (it
    said nothing of the child's own state: a worker's values held in memory on a full
    disk went unlogged)."""
    global _lock
    _lock = threading.Lock()
    _seen.clear()


os.register_at_fork(after_in_child=_forked)


def absorb(
    component: str,
    exc: BaseException,
    *,
    worker: str = "unknown",
    registry: CollectorRegistry | None = None,
    telemetry: Telemetry | None = None,
) -> None:
    """Record an instrumentation failure without raising.

    A component passes its ``telemetry``; ``worker=`` / ``registry=`` stay for callers that
    hold the two separately (the telemetry wins when both are given: this must not raise).
    """
    if telemetry is not None:
        worker, registry = telemetry.worker, telemetry.registry
    with _lock:
        first = component not in _seen
        _seen.add(component)
    level = logging.WARNING if first else logging.DEBUG
    log.log(
        level,
        "corevo-obs %s failed (%s: %s); the host goes on%s",
        # printable: the text often names a file of a directory others can write
        component, type(exc).__name__, printable(str(exc)), "" if first else " (repeat)",
        extra={"corevo_component": component},
    )
    try:
        from .metrics import child

        child(
            "corevo_instrumentation_errors_total", registry,
            worker=worker, component=component,
        ).inc()
    except Exception:  # noqa: BLE001 - the counter is best effort by definition
        pass


def reset_for_tests() -> None:
    with _lock:
        _seen.clear()
