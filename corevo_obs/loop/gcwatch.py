"""Garbage-collection time from ``gc.callbacks``: a running total and the long ones.

A full collection over a large object graph runs on whatever thread allocated last,
holding the GIL throughout, so the loop stalls in C code where no stack can be caught.
The callback times every collection (two calls of a few hundred instructions each), adds
it to a total the sampler's beat reads, and keeps the recent long collections as evidence.
"""

from __future__ import annotations

import gc
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

_KEEP: Final = 32
_LONG: Final = 0.005


@dataclass(frozen=True, slots=True)
class Collection:
    started: float  # monotonic
    seconds: float
    generation: int
    collected: int


class GcWatch:
    """Install with :meth:`install`, read :attr:`total`, take it off with :meth:`uninstall`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.total = 0.0
        self.recent: deque[Collection] = deque(maxlen=_KEEP)
        self._started: float | None = None

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = self._clock()
            return
        started, self._started = self._started, None
        if started is None:
            return
        seconds = self._clock() - started
        self.total += seconds
        if seconds >= _LONG:
            self.recent.append(Collection(started, seconds, int(info.get("generation", -1)),
                                          int(info.get("collected", 0))))

    def install(self) -> GcWatch:
        if self not in gc.callbacks:
            gc.callbacks.append(self)
        return self

    def uninstall(self) -> None:
        while self in gc.callbacks:
            gc.callbacks.remove(self)

    def during(self, start: float, end: float) -> list[Collection]:
        """The long collections that overlap [start, end] (monotonic seconds)."""
        return [c for c in list(self.recent)
                if c.started < end and c.started + c.seconds > start]
