"""Read a quota's state without changing it: who holds, how stale, whose worker is gone.

Reaping is lazy, so a quota nobody acquires keeps its ghosts; the auditor makes them
visible anyway. ``orphaned`` holders are those whose process is provably gone (their id
names a pid on this host that no longer runs); ``unknown`` ones cannot be checked from
here (another host, a foreign id format). ``expired`` holders missed their heartbeat
window and will be reaped by the next acquire. Ages are measured on the backend's clock
(the one the heartbeats were stamped with), not this host's.

Example::

    report = LeaseAuditor(store).audit()             # AsyncLeaseAuditor: await .audit()
    print(report.oldest_age, report.orphaned)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Generic, TypeVar

from ..core.errors import ConfigError
from ..core.marker import blocking
from ..observer import Observer
from .base import AsyncLeaseStore, LeaseStore, _LeaseCore
from .holder import holder_alive

Alive = Callable[[str], "bool | None"]


@dataclass(frozen=True)
class LeaseAudit:
    quota: str
    limit: int
    timeout: float
    held: int
    oldest_age: float
    expired: tuple[str, ...]
    orphaned: tuple[str, ...]
    unknown: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def audit_members(
    store: _LeaseCore, members: Sequence[tuple[str, float]], *, now: float, alive: Alive
) -> LeaseAudit:
    """Classify members (holder, last heartbeat) of ``store``'s quota at time ``now``."""
    verdicts = {h: alive(h) for h, _ in members}
    return LeaseAudit(
        quota=store.quota,
        limit=store.limit,
        timeout=store.timeout,
        held=len(members),
        oldest_age=max((max(0.0, now - t) for _, t in members), default=0.0),
        expired=tuple(h for h, t in members if now - t > store.timeout),
        orphaned=tuple(h for h, v in verdicts.items() if v is False),
        unknown=tuple(h for h, v in verdicts.items() if v is None),
    )


S = TypeVar("S", LeaseStore, AsyncLeaseStore)


class _AuditorCore(Generic[S]):
    """What both auditors share: the store (of the kind the class audits), where they
    report, and the verdicts."""

    #: the store kind this auditor reads, and the auditor for the other kind
    _kind: type[_LeaseCore]
    _other: str

    def __init__(self, store: S, *, observer: Observer | None = None,
                 alive: Alive = holder_alive) -> None:
        if not isinstance(store, self._kind):
            raise ConfigError(f"{type(self).__name__} needs a store of kind "
                              f"{self._kind.__name__}, got {type(store).__name__}: "
                              f"use {self._other}", source=type(self).__name__)
        self.store: S = store
        self.observer = observer or store.observer
        self.alive = alive

    def _report(self, members: Sequence[tuple[str, float]], now: float) -> LeaseAudit:
        report = audit_members(self.store, members, now=now, alive=self.alive)
        self.observer.lease_audited(self.store.quota, oldest_age=report.oldest_age,
                                    orphaned=len(report.orphaned))
        # the held gauge as an acquire would count now (expired holders are reaped first):
        # current even for a quota nobody acquires from
        self.observer.lease_counted(self.store.quota, held=report.held - len(report.expired),
                                    limit=report.limit)
        return report


class LeaseAuditor(_AuditorCore[LeaseStore]):
    """Audits one blocking store and reports through its observer (or the one given)."""

    _kind, _other = LeaseStore, "AsyncLeaseAuditor"

    @blocking
    def audit(self) -> LeaseAudit:
        """Who holds, how stale, whose worker is gone (one read of the backend)."""
        return self._report(self.store.holders(), self.store.server_time())


class AsyncLeaseAuditor(_AuditorCore[AsyncLeaseStore]):
    """``LeaseAuditor`` for an asyncio store: ``await auditor.audit()``."""

    _kind, _other = AsyncLeaseStore, "LeaseAuditor"

    async def audit(self) -> LeaseAudit:
        """See ``LeaseAuditor.audit``."""
        members = await self.store.holders()
        return self._report(members, await self.store.server_time())
