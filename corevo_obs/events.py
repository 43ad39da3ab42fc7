"""Project execution events back to the gateway that holds the client's connection.

The channel between an execution owner and the gateway is best effort: events arrive
late, twice, out of order, or not at all, and a re-claimed job produces a new epoch.
``Projector`` turns that into an exactly-ordered stream per job: it applies
``(execution_id, seq)`` in order, drops duplicates, buffers a bounded number of early
arrivals, discards events of a superseded epoch, and on reconnect (or after a buffer
overflow) replays what it missed from ``EventHistory``, a durable SQLite log. The
channel is for latency; the history is for completeness.

Counting: every offered event is counted once as ``applied``, ``duplicate``,
``stale_epoch`` or ``overflow``, except that an early one is counted ``buffered`` first
and ``applied`` again when its gap fills. ``corevo_events_replayed_total`` counts events
that reached the client only through a replay.

Example (on an event loop; ``EventHistory`` serves threads)::

    history = AsyncEventHistory("/var/lib/app/events.db")  # the executor appends here
    await history.append(event)
    projector = Projector(websocket_send)                   # the gateway
    projector.offer(Event.from_dict(message))               # from the live channel
    projector.replay(await history.latest(job_id))          # on (re)connect
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from prometheus_client import CollectorRegistry

from .core.lifecycle import AsyncClosing, Closing
from .core.marker import blocking
from .core.sqlite import open_sqlite
from .core.telemetry import HasTelemetry, Telemetry
from .observer import MetricsObserver, Observer, ProjectOutcome

__all__ = [
    "AsyncEventHistory",
    "Event",
    "EventHistory",
    "Projector",
]


DEFAULT_MAX_BUFFER: Final = 256
FIRST_SEQ: Final = 1


@dataclass(frozen=True)
class Event:
    """One event of one execution; ``seq`` counts from 1 within the execution."""

    job_id: str
    execution_id: str
    epoch: int
    seq: int
    type: str
    payload: Any = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Event:
        return cls(d["job_id"], d["execution_id"], int(d["epoch"]), int(d["seq"]), d["type"],
                   d.get("payload"))


@dataclass
class _Stream:
    """Projection state of one job: the generation it follows and the next seq due."""

    epoch: int
    execution_id: str
    next_seq: int = FIRST_SEQ
    early: dict[int, Event] = field(default_factory=dict)


class Projector(HasTelemetry):
    """Applies each job's events exactly once and in order, whatever the channel did.

    ``sink`` receives applied events; if it raises, the event stays unapplied (a retry or
    a replay delivers it again). ``max_buffer`` bounds the early arrivals kept per job;
    beyond it events are dropped as ``overflow`` and a replay must fill the gap.
    Its series are the observer's: given a ``MetricsObserver``, its ``worker`` and
    ``registry`` are the defaults of this one's.
    """

    def __init__(
        self,
        sink: Callable[[Event], object],
        *,
        max_buffer: int = DEFAULT_MAX_BUFFER,
        observer: Observer | None = None,
        worker: str | None = None,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.sink = sink
        self.max_buffer = max_buffer
        if isinstance(observer, MetricsObserver):  # it writes the series: report as it does
            worker = observer.worker if worker is None else worker
            registry = observer.registry if registry is None else registry
        self._telemetry = t = Telemetry.resolve(worker, registry)
        self.observer = observer or MetricsObserver(worker=t.worker, registry=t.registry)
        self._streams: dict[str, _Stream] = {}

    def offer(self, event: Event) -> ProjectOutcome:
        """Consume one event from the live channel; returns what happened to it."""
        outcome = self._consume(event)
        self.observer.event_projected(outcome)
        return outcome

    def _consume(self, e: Event) -> ProjectOutcome:
        s = self._streams.get(e.job_id)
        if s is None or e.epoch > s.epoch:  # a newer generation: earlier ones are void
            s = self._streams[e.job_id] = _Stream(e.epoch, e.execution_id)
        elif e.epoch < s.epoch or e.execution_id != s.execution_id:
            return "stale_epoch"
        if e.seq < s.next_seq or e.seq in s.early:
            return "duplicate"
        if e.seq > s.next_seq:
            if len(s.early) >= self.max_buffer:
                return "overflow"
            s.early[e.seq] = e
            return "buffered"
        self._apply(s, e)
        while s.next_seq in s.early:  # the gap is filled: flush what waited behind it
            self._apply(s, s.early.pop(s.next_seq))
            self.observer.event_projected("applied")
        return "applied"

    def _apply(self, s: _Stream, e: Event) -> None:
        self.sink(e)
        s.next_seq = e.seq + 1

    def replay(self, events: Iterable[Event]) -> int:
        """Feed a job's current generation from durable history — ``history.latest(job)``
        of an ``EventHistory``, or ``await`` it on an ``AsyncEventHistory`` — and return
        how many events were applied only thanks to it (already-seen ones count as
        duplicates). The projector does no I/O: the history's own class says where the
        read runs (this thread, or off the loop).
        """
        n = 0
        for event in events:
            if self.offer(event) == "applied":
                n += 1
        self.observer.replayed(n)
        return n

    def position(self, job_id: str) -> tuple[int, str, int] | None:
        """(epoch, execution_id, next seq due) for a job, or None if never seen."""
        s = self._streams.get(job_id)
        return None if s is None else (s.epoch, s.execution_id, s.next_seq)

    def pending(self, job_id: str) -> int:
        """Early events waiting for a gap to fill."""
        s = self._streams.get(job_id)
        return 0 if s is None else len(s.early)

    def forget(self, job_id: str) -> None:
        """Drop a finished job's state (keeps memory bounded on a long-lived gateway)."""
        self._streams.pop(job_id, None)


class EventHistory(Closing):
    """The durable log the executor appends to: one row per ``(execution_id, seq)``.

    Appending the same event twice stores it once, so an executor may retry freely.
    """

    SCHEMA: Final = """
    CREATE TABLE IF NOT EXISTS corevo_events (
        execution_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        job_id TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        type TEXT NOT NULL,
        payload TEXT,
        PRIMARY KEY (execution_id, seq)
    )"""
    INDEX: Final = (
        "CREATE INDEX IF NOT EXISTS corevo_events_job ON corevo_events (job_id, epoch, seq)"
    )

    def __init__(self, path: str | Path) -> None:
        self._lock = threading.Lock()
        self._db = open_sqlite(path)
        self._db.execute(self.SCHEMA)
        self._db.execute(self.INDEX)

    @blocking
    def append(self, event: Event) -> bool:
        """Store an event; False if that (execution_id, seq) was already there."""
        with self._lock:
            cur = self._db.execute(
                "INSERT OR IGNORE INTO corevo_events"
                " (execution_id, seq, job_id, epoch, type, payload) VALUES (?, ?, ?, ?, ?, ?)",
                (event.execution_id, event.seq, event.job_id, event.epoch, event.type,
                 json.dumps(event.payload)),
            )
            return cur.rowcount == 1

    @blocking
    def latest(self, job_id: str) -> list[Event]:
        """The events of the job's newest epoch, in seq order."""
        with self._lock:
            rows = self._db.execute(
                "SELECT job_id, execution_id, epoch, seq, type, payload FROM corevo_events"
                " WHERE job_id = ? AND epoch = (SELECT MAX(epoch) FROM corevo_events"
                " WHERE job_id = ?) ORDER BY seq", (job_id, job_id)).fetchall()
        return [Event(j, x, ep, sq, t, json.loads(p)) for j, x, ep, sq, t, p in rows]

    @blocking
    def close(self) -> None:
        with self._lock:
            self._db.close()


class AsyncEventHistory(AsyncClosing):
    """``EventHistory`` for an event loop: the same log and statements, each run on one
    thread of this history's own (sqlite3 has no async driver; one thread keeps the
    appends in order and the loop free while another process holds the file's lock).
    The file is opened on that thread at the first call.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = path
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="corevo-events")
        self._history: EventHistory | None = None

    def _sync(self) -> EventHistory:
        if self._history is None:
            self._history = EventHistory(self.path)
        return self._history

    async def _call(self, fn: Callable[[EventHistory], Any]) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(self._sync()))

    async def append(self, event: Event) -> bool:
        """See ``EventHistory.append``."""
        return bool(await self._call(lambda h: h.append(event)))

    async def latest(self, job_id: str) -> list[Event]:
        """See ``EventHistory.latest``."""
        events: list[Event] = await self._call(lambda h: h.latest(job_id))
        return events

    async def aclose(self) -> None:
        if self._history is not None:
            await self._call(lambda h: h.close())
        self._executor.shutdown(wait=False)
