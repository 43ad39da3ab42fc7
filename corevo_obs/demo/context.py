"""What every drill gets from the orchestrator: sizes, paths, children, progress."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .procs import Children
from .progress import Progress


@dataclass
class DemoContext:
    workers: int
    short: bool
    workdir: Path
    children: Children
    progress: Progress
    metrics_port: int | None = None
    redis_url: str | None = None

    def port_args(self, index: int) -> list[str]:
        """``--metrics-port`` for worker slot ``index`` (port, port+1, ...) if requested."""
        if self.metrics_port is None:
            return []
        return ["--metrics-port", str(self.metrics_port + index)]
