"""The demo's child processes: spawned through one registry, always reaped.

Children run in their own process group, so a terminal's Ctrl-C reaches only the
orchestrator, which then stops them in order: SIGTERM, a short grace period, SIGKILL
for what is left, and ``wait`` for every one (no zombies, no orphans). Each child's
stderr goes to a log file in the demo's temp dir; a failure quotes its last lines.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from ..core.errors import ConfigError

GRACE_SECONDS: Final = 3.0
READY_TIMEOUT: Final = 30.0


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[str]
    log: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])

    def failed(self, what: str) -> ConfigError:
        tail = self.log_tail()
        return ConfigError(f"worker {self.name} (pid {self.pid}) {what}"
                           + (f": {tail.splitlines()[-1]}" if tail else ""), source="demo")


class Children:
    """Every worker process of one demo run."""

    def __init__(self, workdir: Path, env: dict[str, str]) -> None:
        self.workdir = workdir
        self.env = env
        self.live: list[Child] = []
        self._n = 0

    def spawn(self, name: str, *args: str) -> Child:
        self._n += 1
        log = self.workdir / f"{name}.{self._n}.log"
        with open(log, "ab") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", "corevo_obs.demo.worker", "--worker", name, *args],
                env=self.env, stdout=subprocess.PIPE, stderr=err, text=True,
                process_group=0,
            )
        child = Child(name, proc, log)
        self.live.append(child)
        return child

    def ready(self, child: Child, timeout: float = READY_TIMEOUT) -> dict[str, Any]:
        """Wait for the child's JSON ready line."""
        assert child.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            readable, _, _ = select.select([child.proc.stdout], [], [], 0.1)
            if readable:
                line = child.proc.stdout.readline()
                if line:
                    return dict(json.loads(line))
            if child.proc.poll() is not None:
                raise child.failed(f"exited with code {child.proc.returncode} before ready")
        raise child.failed(f"not ready after {timeout:.0f}s")

    def result(self, child: Child, timeout: float) -> dict[str, Any]:
        """Wait for a run-to-completion child and parse its last stdout line."""
        try:
            out, _ = child.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise child.failed(f"did not finish within {timeout:.0f}s") from None
        self._forget(child)
        lines = (out or "").strip().splitlines()
        if child.proc.returncode != 0 or not lines:
            raise child.failed(f"exited with code {child.proc.returncode}")
        return dict(json.loads(lines[-1]))

    def kill(self, child: Child) -> None:
        """SIGKILL: the crash drill 3 needs (no finally, no atexit, nothing released)."""
        child.proc.send_signal(signal.SIGKILL)
        child.proc.wait()
        self._forget(child)

    def stop(self, children: list[Child] | None = None, grace: float = GRACE_SECONDS) -> None:
        """SIGTERM, wait up to ``grace`` seconds, SIGKILL the rest; reap all."""
        targets = list(self.live if children is None else children)
        for c in targets:
            if c.proc.poll() is None:
                _signal(c, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for c in targets:
            try:
                c.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal(c, signal.SIGKILL)
                c.proc.wait()
            self._forget(c)

    def _forget(self, child: Child) -> None:
        if child.proc.stdout is not None and not child.proc.stdout.closed:
            child.proc.stdout.close()
        if child in self.live:
            self.live.remove(child)


def _signal(child: Child, sig: int) -> None:
    try:
        os.kill(child.pid, sig)
    except ProcessLookupError:
        pass
