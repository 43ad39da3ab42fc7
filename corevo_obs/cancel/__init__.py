"""Cross-worker cancel and command routing that survive lost messages.

A cancel writes a marker with a TTL, then wakes the owner; the owner stops at once on the
message, or at its next lease heartbeat on the marker, or its lease expires. Commands are
routed to the owner the job table names and re-checked there (job, epoch, lease).
``redis`` is imported only by ``RedisCancelBus``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .bus import CancelBus, Command, Subscription
from .gateway import CommandGateway, Routed, SideEffectGate, Stopped, Target
from .owner import CommandInbox, Execution, Stop, execution_holder
from .sqlite_bus import SqliteCancelBus

if TYPE_CHECKING:
    from .redis_bus import RedisCancelBus

__all__ = [
    "CancelBus",
    "Command",
    "CommandInbox",
    "Execution",
    "CommandGateway",
    "RedisCancelBus",
    "Routed",
    "SideEffectGate",
    "SqliteCancelBus",
    "Stop",
    "Stopped",
    "Subscription",
    "Target",
    "execution_holder",
]


def __getattr__(name: str) -> Any:
    if name == "RedisCancelBus":
        from .redis_bus import RedisCancelBus

        globals()[name] = RedisCancelBus  # resolved once (and visible to doc tools)
        return RedisCancelBus
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
