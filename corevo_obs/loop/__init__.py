"""Loop health: lag sampler, frozen-now heartbeat and stall watchdog."""

from .health import LoopHealth, LoopHealthConfig, install_loop_health
from .lag import LoopLagSampler
from .stacks import FrameInfo
from .watchdog import StallReport, StallWatchdog

__all__ = [
    "FrameInfo",
    "LoopHealth",
    "LoopHealthConfig",
    "LoopLagSampler",
    "StallReport",
    "StallWatchdog",
    "install_loop_health",
]
