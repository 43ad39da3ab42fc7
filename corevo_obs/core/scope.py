"""Who measures and where the series go: one worker label and one registry, resolved once.

Every component used to take ``worker=`` and ``registry=`` and resolve each again; a host
that passed them to one component and forgot another got two worker labels in one
process. A ``Scope`` is resolved once and handed to every component (``scope=``), so their
series share the worker label and the registry, and failures they absorb are counted there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry

from .errors import ConfigError
from .identity import worker_name
from .metrics import child

__all__ = ["Scope"]


@dataclass(frozen=True)
class Scope:
    """The ``worker`` label and the registry of a component's series (immutable).

    ``Scope.resolve`` is the precedence: an explicit ``scope`` wins; else ``worker`` (the
    argument, then ``$COREVO_WORKER``, then ``pid<N>``) and ``registry`` (the argument,
    then prometheus_client's global registry). A scope together with a different worker or
    registry is a ``ConfigError``: one of them would be silently ignored.

    >>> from prometheus_client import CollectorRegistry
    >>> scope = Scope.resolve(worker="w0", registry=CollectorRegistry())
    >>> scope.child("corevo_event_loop_lag_seconds").observe(0.01)
    >>> scope.registry.get_sample_value("corevo_event_loop_lag_seconds_count", {"worker": "w0"})
    1.0
    >>> Scope.resolve(scope=scope, worker="w0") is scope  # the same worker is no conflict
    True
    >>> try:
    ...     Scope.resolve(scope=scope, worker="w1")
    ... except ConfigError as exc:
    ...     print(exc)
    scope=Scope(worker='w0') and worker='w1': pass one or the other
    """

    worker: str
    registry: CollectorRegistry

    def __post_init__(self) -> None:
        worker_name(self.worker)  # the same bound on the label as every other path

    def __repr__(self) -> str:
        return f"Scope(worker={self.worker!r})"

    @classmethod
    def resolve(
        cls,
        worker: str | None = None,
        registry: CollectorRegistry | None = None,
        scope: Scope | None = None,
    ) -> Scope:
        """The scope a component built with these keywords uses (None = not given)."""
        if scope is None:
            return cls(worker_name(worker), REGISTRY if registry is None else registry)
        conflicts = []
        if worker is not None and worker != scope.worker:
            conflicts.append(f"worker={worker!r}")
        if registry is not None and registry is not scope.registry:
            conflicts.append("a different registry=")
        if conflicts:
            raise ConfigError(f"scope={scope!r} and {' and '.join(conflicts)}: "
                              "pass one or the other")
        return scope

    def child(self, name: str, **labels: str) -> Any:
        """``core.metrics.child`` of a per-worker series: this registry, this worker label."""
        return child(name, self.registry, worker=self.worker, **labels)


class Scoped:
    """Base of a component that keeps one ``scope``: ``.worker`` and ``.registry`` read it
    (the attributes users read before the scope existed)."""

    scope: Scope

    @property
    def worker(self) -> str:
        return self.scope.worker

    @property
    def registry(self) -> CollectorRegistry:
        return self.scope.registry
