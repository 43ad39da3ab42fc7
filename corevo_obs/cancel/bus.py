"""The transport under cancel and command routing: a durable marker plus a fast wake-up.

The rule (docs/cancel.md): "events are the accelerator, state is the truth". A cancel
first writes a marker with a TTL (the truth, read at every lease heartbeat), then sends a
fire-and-forget message to the owner (the accelerator). A backend implements both halves;
everything else (routing, the owner's re-check, metrics) is shared and lives above it.

Backends: ``RedisCancelBus`` (hash with PEXPIRE + PUBLISH) and ``SqliteCancelBus`` (a
marker row with an expiry + a local datagram socket per owner).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal

from ..core.lifecycle import AsyncClosing

CommandKind = Literal["cancel", "input"]
DEFAULT_MARKER_TTL: Final = 3600.0


@dataclass(frozen=True)
class Command:
    """One command addressed to a generation: ``(job_id, epoch, execution_id)`` as the
    gateway read it. The owner applies it only if that is still the current generation.
    """

    kind: CommandKind
    job_id: str
    owner: str
    epoch: int
    execution_id: str | None
    sent_at: float
    payload: str | None = None

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes | str) -> Command:
        data: dict[str, Any] = json.loads(raw)
        return cls(**data)


class Subscription(AsyncClosing, ABC):
    """The owner's end of the wake-up channel; ``get`` raises when the channel breaks."""

    @abstractmethod
    async def get(self) -> Command:
        """The next command (waits)."""

    @abstractmethod
    async def aclose(self) -> None:
        """Stop receiving; a command sent meanwhile is lost (the marker is not)."""


class CancelBus(AsyncClosing, ABC):
    """Marker store + owner channel. Every method may raise a backend error: callers decide."""

    @abstractmethod
    async def mark(self, execution_id: str, requested_at: float, ttl: float) -> None:
        """Write (or refresh) the cancel marker; it disappears by itself after ``ttl`` s."""

    @abstractmethod
    async def marker(self, execution_id: str) -> float | None:
        """When the cancel was requested, or None when there is no live marker."""

    @abstractmethod
    async def acknowledge(self, execution_id: str, stopped_at: float, ttl: float) -> None:
        """Record that the execution stopped for a cancel (the late-side-effect reference)."""

    @abstractmethod
    async def acknowledged(self, execution_id: str) -> float | None:
        """When the execution acknowledged a cancel, or None."""

    @abstractmethod
    async def send(self, command: Command) -> int:
        """Best effort: how many receivers took it (0 = lost, the marker must carry it)."""

    @abstractmethod
    async def subscribe(self, owner: str) -> Subscription:
        """Start receiving the commands addressed to ``owner``."""

    @abstractmethod
    async def aclose(self) -> None:
        """Release backend resources."""
