"""Loop health: lag sampler, frozen-now heartbeat and stall watchdog (stalls carry a
cause: one of ``CAUSES``)."""

from .causes import CAUSES, BusyThread
from .health import LoopHealth, LoopHealthConfig, install_loop_health
from .lag import LoopLagSampler
from .stacks import FrameFilter, FrameInfo
from .watchdog import StallReport, StallWatchdog

__all__ = [
    "CAUSES",
    "BusyThread",
    "FrameFilter",
    "FrameInfo",
    "LoopHealth",
    "LoopHealthConfig",
    "LoopLagSampler",
    "StallReport",
    "StallWatchdog",
    "install_loop_health",
]
