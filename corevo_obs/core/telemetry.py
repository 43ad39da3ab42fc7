"""Who measures and where the series go: one worker label and one registry, resolved once.

Every component used to take ``worker=`` and ``registry=`` and resolve each again; a host
that passed them to one component and forgot another got two worker labels in one
process. A ``Telemetry`` is resolved once and handed to every component (``telemetry=``), so their
series share the worker label and the registry, and failures they absorb are counted there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry

from . import guard
from .errors import ConfigError
from .identity import worker_name
from .metrics import child

__all__ = ["Telemetry"]


@dataclass(frozen=True)
class Telemetry:
    """The ``worker`` label and the registry of a component's series (immutable).

    ``Telemetry.resolve`` is the precedence: an explicit ``telemetry`` wins; else ``worker`` (the
    argument, then ``$COREVO_WORKER``, then ``pid<N>``) and ``registry`` (the argument,
    then prometheus_client's global registry). A telemetry together with a different worker or
    registry is a ``ConfigError``: one of them would be silently ignored.

    >>> from prometheus_client import CollectorRegistry
    >>> telemetry = Telemetry.resolve(worker="w0", registry=CollectorRegistry())
    >>> telemetry.child("corevo_event_loop_lag_seconds").observe(0.01)
    >>> telemetry.registry.get_sample_value("corevo_event_loop_lag_seconds_count", {"worker": "w0"})
    1.0
    >>> Telemetry.resolve(telemetry=telemetry, worker="w0") is telemetry  # same worker: fine
    True
    >>> try:
    ...     Telemetry.resolve(telemetry=telemetry, worker="w1")
    ... except ConfigError as exc:
    ...     print(exc)
    telemetry=Telemetry(worker='w0') and worker='w1': pass one or the other
    """

    worker: str
    registry: CollectorRegistry

    def __post_init__(self) -> None:
        worker_name(self.worker)  # the same bound on the label as every other path

    def __repr__(self) -> str:
        return f"Telemetry(worker={self.worker!r})"

    @classmethod
    def resolve(
        cls,
        worker: str | None = None,
        registry: CollectorRegistry | None = None,
        telemetry: Telemetry | None = None,
    ) -> Telemetry:
        """The telemetry a component built with these keywords uses (None = not given)."""
        if telemetry is None:
            return cls(worker_name(worker), REGISTRY if registry is None else registry)
        conflicts = []
        if worker is not None and worker != telemetry.worker:
            conflicts.append(f"worker={worker!r}")
        if registry is not None and registry is not telemetry.registry:
            conflicts.append("a different registry=")
        if conflicts:
            raise ConfigError(f"telemetry={telemetry!r} and {' and '.join(conflicts)}: "
                              "pass one or the other")
        return telemetry

    @classmethod
    def resolve_on_use(
        cls,
        component: str,
        worker: str | None = None,
        registry: CollectorRegistry | None = None,
        telemetry: Telemetry | None = None,
    ) -> Telemetry:
        """``resolve`` for a component built on a request's or task's path, not at start.

        There a bad ``$COREVO_WORKER`` would fail every request instead of the start, so
        it is absorbed (counted under ``component``, logged once) and the default label
        ``pid<N>`` is used. The host's own arguments still raise: that is its code.
        """
        try:
            return cls.resolve(worker, registry, telemetry)
        except ConfigError as exc:
            if worker is not None or telemetry is not None:
                raise
            fallback = cls(f"pid{os.getpid()}", REGISTRY if registry is None else registry)
            guard.absorb(component, exc, telemetry=fallback)
            return fallback

    def child(self, name: str, **labels: str) -> Any:
        """``core.metrics.child`` of a per-worker series: this registry, this worker label."""
        return child(name, self.registry, worker=self.worker, **labels)


class HasTelemetry:
    """Base of a component that keeps one ``telemetry``: ``.worker`` and ``.registry`` read it
    (the attributes users read before the telemetry existed)."""

    telemetry: Telemetry

    @property
    def worker(self) -> str:
        return self.telemetry.worker

    @property
    def registry(self) -> CollectorRegistry:
        return self.telemetry.registry
