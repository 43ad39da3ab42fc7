"""The resource attributes that tell one worker's exports from another's.

On the OTel path each process exports its own data (no shared directory), so every
process must say who it is: ``service.instance.id`` is unique per process (the worker
label and the pid: a restarted slot is a new instance whose counters start at 0, which
is how a backend tells a restart from a reset), ``corevo.worker`` is the ``worker`` label
the dashboards group by.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

from opentelemetry.sdk.resources import Resource

from ..core.identity import worker_name

__all__ = ["WORKER_ATTRIBUTE", "worker_resource"]

WORKER_ATTRIBUTE: Final = "corevo.worker"


def worker_resource(
    service_name: str | None = None,
    *,
    worker: str | None = None,
    attributes: Mapping[str, str | int] | None = None,
) -> Resource:
    """``Resource.create`` (so ``$OTEL_SERVICE_NAME`` and ``$OTEL_RESOURCE_ATTRIBUTES``
    apply) plus this process's ``service.instance.id``, ``process.pid`` and
    ``corevo.worker``; ``service_name`` and ``attributes`` win over the environment."""
    name = worker_name(worker)
    pid = os.getpid()
    attrs: dict[str, str | int] = {
        "service.instance.id": f"{name}-{pid}", "process.pid": pid, WORKER_ATTRIBUTE: name}
    if service_name is not None:
        attrs["service.name"] = service_name
    attrs.update(attributes or {})
    return Resource.create(attrs)
