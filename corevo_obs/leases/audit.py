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
from typing import Any

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


class _AuditorCore:
    """What both auditors share: the store, where they report, and the verdicts."""

    def __init__(self, store: _LeaseCore, *, observer: Observer | None,
                 alive: Alive) -> None:
        self.store = store
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


class LeaseAuditor(_AuditorCore):
    """Audits one blocking store and reports through its observer (or the one given)."""

    store: LeaseStore

    def __init__(self, store: LeaseStore, *, observer: Observer | None = None,
                 alive: Alive = holder_alive) -> None:
        if not isinstance(store, LeaseStore):
            raise ConfigError(f"LeaseAuditor needs a blocking store, got "
                              f"{type(store).__name__}: use AsyncLeaseAuditor",
                              source="LeaseAuditor")
        super().__init__(store, observer=observer, alive=alive)

    @blocking
    def audit(self) -> LeaseAudit:
        """Who holds, how stale, whose worker is gone (one read of the backend)."""
        return self._report(self.store.holders(), self.store.server_time())


class AsyncLeaseAuditor(_AuditorCore):
    """``LeaseAuditor`` for an asyncio store: ``await auditor.audit()``."""

    store: AsyncLeaseStore

    def __init__(self, store: AsyncLeaseStore, *, observer: Observer | None = None,
                 alive: Alive = holder_alive) -> None:
        if not isinstance(store, AsyncLeaseStore):
            raise ConfigError(f"AsyncLeaseAuditor needs an asyncio store, got "
                              f"{type(store).__name__}: use LeaseAuditor",
                              source="AsyncLeaseAuditor")
        super().__init__(store, observer=observer, alive=alive)

    async def audit(self) -> LeaseAudit:
        """See ``LeaseAuditor.audit``."""
        members = await self.store.holders()
        return self._report(members, await self.store.server_time())
