"""Who measures and where the series go: one worker label and one registry, resolved once.

Internal: every public component takes ``worker=`` and ``registry=`` (keyword-only, None =
default) and resolves them here once into a ``Telemetry``, so its series, the series of the
parts it builds (passed ``worker=t.worker, registry=t.registry``) and the failures it absorbs
share one label and one registry. A component keeps it as ``_telemetry``; what it shows
is ``.worker`` and ``.registry`` (``HasTelemetry``). Not part of the public API.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry

from . import guard
from .errors import ConfigError
from .identity import worker_name
from .metrics import child, zero_counters

__all__ = ["Telemetry"]


@dataclass(frozen=True)
class Telemetry:
    """The ``worker`` label and the registry of a component's series (immutable).

    ``Telemetry.resolve`` is the precedence: ``worker`` (the argument, then
    ``$COREVO_WORKER``, then ``pid<N>``) and ``registry`` (the argument, then
    prometheus_client's global registry).

    >>> from prometheus_client import CollectorRegistry
    >>> telemetry = Telemetry.resolve(worker="w0", registry=CollectorRegistry())
    >>> telemetry.child("corevo_event_loop_lag_seconds").observe(0.01)
    >>> telemetry.registry.get_sample_value("corevo_event_loop_lag_seconds_count", {"worker": "w0"})
    1.0
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
    ) -> Telemetry:
        """The telemetry a component built with these keywords uses (None = not given)."""
        return cls(worker_name(worker), REGISTRY if registry is None else registry)

    @classmethod
    def resolve_on_use(
        cls,
        component: str,
        worker: str | None = None,
        registry: CollectorRegistry | None = None,
    ) -> Telemetry:
        """``resolve`` for a component built on a request's or task's path, not at start.

        There a bad ``$COREVO_WORKER`` would fail every request instead of the start, so
        it is absorbed (counted under ``component``, logged once) and the default label
        ``pid<N>`` is used. The host's own arguments still raise: that is its code.
        """
        try:
            return cls.resolve(worker, registry)
        except ConfigError as exc:
            if worker is not None:
                raise
            fallback = cls(f"pid{os.getpid()}", REGISTRY if registry is None else registry)
            guard.absorb(component, exc, telemetry=fallback)
            return fallback

    def child(self, name: str, **labels: str) -> Any:
        """``core.metrics.child`` of a per-worker series: this registry, this worker label."""
        return child(name, self.registry, worker=self.worker, **labels)


    def zero_counters(self, owner: str, **labels: str) -> None:
        """``core.metrics.zero_counters`` for this worker and registry: ``owner``'s
        counters at 0 from its start. A failure (a full metrics directory) is absorbed:
        the owner starts anyway, its counters appear at their first event."""
        try:
            zero_counters(owner, self.registry, worker=self.worker, **labels)
        except Exception as exc:  # noqa: BLE001 - never stop the host's component
            guard.absorb("zero-counters", exc, telemetry=self)


class HasTelemetry:
    """Base of a component that keeps one resolved ``_telemetry`` (private: ``Telemetry`` is
    not public API); its public, read-only ``.worker`` and ``.registry`` read it."""

    _telemetry: Telemetry

    @property
    def worker(self) -> str:
        """The ``worker`` label of this component's series (as resolved at construction)."""
        return self._telemetry.worker

    @property
    def registry(self) -> CollectorRegistry:
        """The registry this component's series are written to."""
        return self._telemetry.registry
