"""corevo-obs: observability and diagnostics for asyncio services run as many processes.

The public API is ``__all__``: what a host needs to put loop health, the four stages,
the offload adapter, exposition and the observer into its runtime. Names resolve on first
use (PEP 562), so ``import corevo_obs`` loads no backend and no feature it does not use.
Backends live in their own namespaces, all alike: ``corevo_obs.leases.RedisLeaseStore``
beside ``corevo_obs.leases.SqliteLeaseStore``, ``corevo_obs.claims.PostgresJobStore``
beside ``corevo_obs.claims.SqliteJobStore``. docs/api.md lists every public name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from .core.errors import (
        BackendUnavailable,
        CatalogError,
        ConfigError,
        CorevoObsError,
        MetricsDirError,
        MetricsPortBusy,
    )
    from .core.identity import worker_name
    from .core.marker import blocking
    from .exposition import (
        MetricsServer,
        enable_multiprocess,
        exposition_registry,
        mark_process_dead,
    )
    from .loop import LoopHealth, LoopHealthConfig, install_loop_health
    from .observer import MetricsObserver, Observer
    from .offload import OffloadAdapter
    from .stages import StageRecorder, TaskStages, current_stages, external, track_task

#: public name -> the module that defines it
_API: Final = {
    "install_loop_health": "loop",
    "LoopHealth": "loop",
    "LoopHealthConfig": "loop",
    "StageRecorder": "stages",
    "TaskStages": "stages",
    "track_task": "stages",
    "current_stages": "stages",
    "external": "stages",
    "OffloadAdapter": "offload",
    "MetricsServer": "exposition",
    "enable_multiprocess": "exposition",
    "mark_process_dead": "exposition",
    "exposition_registry": "exposition",
    "Observer": "observer",
    "MetricsObserver": "observer",
    "worker_name": "core.identity",
    "blocking": "core.marker",
    "CorevoObsError": "core.errors",
    "ConfigError": "core.errors",
    "MetricsPortBusy": "core.errors",
    "MetricsDirError": "core.errors",
    "BackendUnavailable": "core.errors",
    "CatalogError": "core.errors",
}

__all__ = [
    "BackendUnavailable",
    "CatalogError",
    "ConfigError",
    "CorevoObsError",
    "LoopHealth",
    "LoopHealthConfig",
    "MetricsDirError",
    "MetricsObserver",
    "MetricsPortBusy",
    "MetricsServer",
    "Observer",
    "OffloadAdapter",
    "StageRecorder",
    "TaskStages",
    "blocking",
    "current_stages",
    "enable_multiprocess",
    "exposition_registry",
    "external",
    "install_loop_health",
    "mark_process_dead",
    "track_task",
    "worker_name",
]  # the same names as _API (tests/test_imports.py)


def __getattr__(name: str) -> Any:
    module = _API.get(name)
    if module is not None:
        value = getattr(importlib.import_module(f".{module}", __name__), name)
        globals()[name] = value  # resolved once; later lookups are plain attribute reads
        return value
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("corevo-obs")
        except PackageNotFoundError:  # a source tree that was never installed
            found = "0+unknown"
        globals()["__version__"] = found
        return found
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_API, "__version__"})
