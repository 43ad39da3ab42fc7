"""Periodic compaction in the process that serves ``/metrics``.

SIGKILLed workers run no exit hook, so someone else must notice they are gone: a daemon
thread that, every ``interval`` seconds, compacts when at least ``min_dead`` writers are
proven dead. It never waits behind another compactor and never raises into the host.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Final

from ..core import promclient
from ..core.errors import ConfigError
from ..core.guard import absorb
from ..core.lifecycle import Service, starts, stops
from .compactor import CompactionResult, compact_backlog
from .lock import LockBusy
from .status import scan

DEFAULT_INTERVAL: Final = 10.0


class Janitor(Service):
    """Compact ``directory`` in the background.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as metrics_dir:
    ...     janitor = Janitor(metrics_dir, interval=5.0).start()  # one pass every 5 s
    ...     first = janitor.run_once()  # a pass now: no writer is dead yet, nothing to do
    ...     janitor.close()
    >>> first is None, janitor.runs
    (True, 1)
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        interval: float = DEFAULT_INTERVAL,
        min_dead: int = 1,
    ) -> None:
        if interval <= 0:
            raise ConfigError("interval must be positive")
        promclient.reserve_value_files()  # its own counters must not SIGBUS on a full disk
        self.directory = Path(directory)
        self.interval = interval
        self.min_dead = min_dead
        self.runs = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> CompactionResult | None:
        """One pass; None when there was nothing to do or another compactor was busy."""
        self.runs += 1
        try:
            if len(scan(self.directory).dead_writers) < self.min_dead:
                return None
            return compact_backlog(self.directory, blocking=False)
        except LockBusy:
            return None
        except Exception as exc:  # noqa: BLE001 - a janitor failure must not reach the host
            absorb("mpdir-janitor", exc)
            return None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.run_once()

    @starts
    def start(self) -> None:
        """Start the thread (once: a second start keeps it); returns the janitor."""
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._run, name="corevo-mpdir-janitor", daemon=True
        )
        self._thread.start()

    @stops
    def close(self) -> None:
        """Stop the thread after its current pass (bounded: 10 s); safe to call twice."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

