"""Typed outcomes of the claim protocol: what a caller may do next is in the type."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

JobState = Literal["queued", "running", "completed", "failed", "lost", "timeout", "cancelled"]
TERMINAL: frozenset[str] = frozenset({"completed", "failed", "lost", "timeout", "cancelled"})


@dataclass(frozen=True)
class Claim:
    """A won claim: the fencing identity (owner, epoch, token) every later step must show."""

    job_id: str
    owner: str
    epoch: int
    token: str
    claimed_at: float


@dataclass(frozen=True)
class ClaimOutcome:
    """``won`` with its ``Claim``, or ``lost`` (someone else owns it, or it is not queued)."""

    job_id: str
    claim: Claim | None

    @property
    def won(self) -> bool:
        return self.claim is not None

    @property
    def outcome(self) -> Literal["won", "lost"]:
        return "won" if self.claim is not None else "lost"


@dataclass(frozen=True)
class StartOutcome:
    """``started`` (execution bound to this claim) or ``fenced`` (0 rows: a stale owner)."""

    job_id: str
    execution_id: str | None

    @property
    def started(self) -> bool:
        return self.execution_id is not None

    @property
    def outcome(self) -> Literal["started", "fenced"]:
        return "started" if self.execution_id is not None else "fenced"


@dataclass(frozen=True)
class Recovery:
    """What one recovery pass did: claims requeued before start, running jobs marked lost."""

    reclaimed: int
    lost: int


@dataclass(frozen=True)
class Job:
    id: str
    state: str
    owner: str | None
    claimed_at: float | None
    epoch: int
    token: str | None
    execution_id: str | None
    execution_started_at: float | None
    created_at: float
    finished_at: float | None
    payload: str | None
