"""A progress display on stderr: one line per step, and a live status line on a TTY.

Logs (CI, a pipe) get the step lines and notable events only; a terminal also gets a
status line rewritten in place, so a minute-long run never looks hung.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, total: int, *, stream: TextIO | None = None, quiet: bool = False) -> None:
        self.total = total
        self.stream = stream or sys.stderr
        self.quiet = quiet
        self.tty = self.stream.isatty()
        self.started = time.monotonic()
        self._step = 0
        self._status_len = 0

    def _elapsed(self) -> str:
        return f"{time.monotonic() - self.started:5.1f}s"

    def _write(self, text: str) -> None:
        if self.quiet:
            return
        self.clear()
        self.stream.write(text + "\n")
        self.stream.flush()

    def step(self, title: str) -> None:
        """Start the next drill."""
        self._step += 1
        self._write(f"[{self._elapsed()}] drill {self._step}/{self.total}: {title}")

    def event(self, text: str) -> None:
        """Something worth a line in any log (a kill, a phase change)."""
        self._write(f"[{self._elapsed()}]   {text}")

    def status(self, text: str) -> None:
        """A transient line, shown only on a terminal."""
        if self.quiet or not self.tty:
            return
        line = f"[{self._elapsed()}]   {text}"[:120]
        pad = max(0, self._status_len - len(line))
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()
        self._status_len = len(line)

    def clear(self) -> None:
        """Erase a pending status line (before an error or the report)."""
        if self._status_len and not self.quiet:
            self.stream.write("\r" + " " * self._status_len + "\r")
            self.stream.flush()
            self._status_len = 0

    def done(self, text: str) -> None:
        self._write(f"[{self._elapsed()}]   done: {text}")
