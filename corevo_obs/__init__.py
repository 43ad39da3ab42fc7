"""corevo-obs: observability and diagnostics for asyncio services run as many processes.

The public API is this list; everything else is importable but not promised.
"""

from .blocking import blocking
from .cancel import (
    CancelBus,
    CommandGateway,
    CommandInbox,
    SideEffectGate,
    SqliteCancelBus,
    execution_holder,
)
from .catalog import CATALOG, MetricSpec
from .claims import Claim, ClaimOutcome, JobStore, PostgresJobStore, SqliteJobStore, StartOutcome
from .errors import CatalogError, ConfigError, CorevoObsError, MetricsDirError
from .events import Event, EventHistory, Projector
from .exposition import MetricsServer, enable_multiprocess, mark_process_dead
from .identity import worker_name
from .leases import (
    AsyncLease,
    AsyncLeaseStore,
    AsyncSqliteLeaseStore,
    Lease,
    LeaseAuditor,
    LeaseStore,
    SqliteLeaseStore,
)
from .loop import (
    LoopHealth,
    LoopHealthConfig,
    LoopLagSampler,
    StallReport,
    StallWatchdog,
    install_loop_health,
)
from .observer import MetricsObserver, Observer
from .offload import (
    AdapterClosed,
    OffloadAdapter,
    OffloadRejected,
    QueueFull,
    SlotSunk,
    WaitTimeout,
)
from .stages import StageRecorder, TaskStages, current_stages, external, track_task

__version__ = "0.1.0"

__all__ = [
    "AdapterClosed",
    "OffloadAdapter",
    "OffloadRejected",
    "QueueFull",
    "SlotSunk",
    "StageRecorder",
    "TaskStages",
    "WaitTimeout",
    "current_stages",
    "external",
    "track_task",
    "CancelBus",
    "CommandGateway",
    "CommandInbox",
    "SideEffectGate",
    "SqliteCancelBus",
    "execution_holder",
    "AsyncLease",
    "AsyncLeaseStore",
    "AsyncSqliteLeaseStore",
    "Claim",
    "ClaimOutcome",
    "Event",
    "EventHistory",
    "JobStore",
    "Lease",
    "LeaseAuditor",
    "LeaseStore",
    "MetricsObserver",
    "Observer",
    "PostgresJobStore",
    "Projector",
    "SqliteJobStore",
    "SqliteLeaseStore",
    "StartOutcome",
    "CATALOG",
    "CatalogError",
    "ConfigError",
    "CorevoObsError",
    "LoopHealth",
    "LoopHealthConfig",
    "LoopLagSampler",
    "MetricSpec",
    "MetricsDirError",
    "MetricsServer",
    "StallReport",
    "StallWatchdog",
    "blocking",
    "enable_multiprocess",
    "install_loop_health",
    "mark_process_dead",
    "worker_name",
]
