"""Errors of the multiprocess-directory tools, under the suite's root exception."""

from __future__ import annotations

from ..core.errors import CorevoObsError


class CompactionError(CorevoObsError):
    """The directory is in a state the compactor refuses to act on (e.g. unreadable journal)."""

    def __init__(self, message: str, *, path: str) -> None:
        self.path = path
        super().__init__(f"{path}: {message}")
