"""The client side of a run: a seeded plan, bounded in requests and time, on loopback.

The plan (every request's start offset, its path number and whether the client abandons
it) is drawn from the workload's seed before anything is sent, one random stream per
mix entry so adding an entry does not move the others; its digest is in the report, so
two runs of one file and seed are the same plan. Probes (the unrelated heartbeat and the
first-event request) run on their own connections at a fixed rate, first alone for the
idle baseline, then beside the load. A redirect off loopback is never followed
(``loopback``): the request's outcome is ``redirect_refused``, judged as an error.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final

from .loopback import OffLoopback, loopback_only
from .workload import MixEntry, ProbeSpec, Workload

DEFAULT_TIMEOUT: Final = 30.0
DRAIN_SECONDS: Final = 10.0
DEFAULT_SHORT_CANCEL: Final = 0.05


@dataclass(frozen=True)
class Planned:
    at: float
    entry: int
    n: int
    cancel: bool


def plan(workload: Workload) -> list[Planned]:
    """Every request of the run, in start order, capped at ``max_requests``."""
    items: list[Planned] = []
    for idx, m in enumerate(workload.mix):
        rng = random.Random(f"{workload.seed}:{m.name}")
        t = 0.0
        while True:
            t += rng.expovariate(m.rate)
            if t >= workload.duration_seconds:
                break
            items.append(Planned(round(t, 6), idx, rng.randrange(1, 1000),
                                 rng.random() < m.cancel_fraction))
    items.sort(key=lambda p: (p.at, p.entry))
    return items[:workload.max_requests]


def plan_digest(items: list[Planned]) -> str:
    raw = json.dumps([[p.at, p.entry, p.n, p.cancel] for p in items]).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


@dataclass
class Outcome:
    """One request as the client saw it (times in seconds since the run started)."""

    entry: int
    started: float
    outcome: str = "unfinished"
    status: int | None = None
    latency: float | None = None
    first_byte: float | None = None


@dataclass
class ProbeSample:
    phase: str
    at: float
    latency: float | None  # None: the probe failed
    error: str | None = None


@dataclass
class DriverResult:
    plan_size: int
    plan_digest: str
    baseline_start: float = 0.0
    load_start: float = 0.0
    load_end: float = 0.0
    outcomes: list[Outcome] = field(default_factory=list)
    skipped: int = 0
    heartbeat: list[ProbeSample] = field(default_factory=list)
    first_event: list[ProbeSample] = field(default_factory=list)
    kill: dict[str, Any] | None = None

    def by_entry(self, workload: Workload) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for idx, m in enumerate(workload.mix):
            mine = [o for o in self.outcomes if o.entry == idx]
            lat = sorted(o.latency for o in mine if o.latency is not None and o.outcome == "ok")
            out[m.name] = {
                "kind": m.kind, "path": m.path, "rate": m.rate, "sent": len(mine),
                "outcomes": dict(sorted(Counter(o.outcome for o in mine).items())),
                "latency_p50_seconds": quantile(lat, 0.5),
                "latency_p99_seconds": quantile(lat, 0.99),
            }
        return out


def quantile(values: list[float], q: float) -> float | None:
    """Nearest-rank quantile of sorted values (None when there are none)."""
    if not values:
        return None
    rank = min(len(values) - 1, max(0, int(q * len(values) + 0.999999) - 1))
    return round(values[rank], 6)


class Driver:
    """Runs the plan against ``base_url``; ``kill`` is called once at the kill offset."""

    def __init__(self, workload: Workload, base_url: str, *,
                 clock: Callable[[], float],
                 kill: Callable[[], Awaitable[dict[str, Any]]] | None = None,
                 on_phase: Callable[[str], Awaitable[None]] | None = None) -> None:
        self.w = workload
        self.base = base_url
        self.ws_base = "ws" + base_url.removeprefix("http")
        self.clock = clock
        self.kill = kill
        self.on_phase = on_phase
        self.items = plan(workload)
        self.result = DriverResult(len(self.items), plan_digest(self.items))
        self._phase = "baseline"
        self._in_flight = 0

    async def run(self) -> DriverResult:
        import aiohttp

        r = self.result
        def session(limit: int) -> aiohttp.ClientSession:
            return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=limit),
                                         middlewares=(loopback_only,))

        async with session(self.w.max_in_flight) as mix, session(1) as hb, session(1) as fe:
            stop = asyncio.Event()
            probes = [asyncio.create_task(self._probe(hb, self.w.heartbeat, r.heartbeat, stop))]
            if self.w.first_event is not None:
                probes.append(asyncio.create_task(
                    self._probe(fe, self.w.first_event, r.first_event, stop)))
            r.baseline_start = self.clock()
            await asyncio.sleep(self.w.baseline_seconds)
            if self.on_phase:
                await self.on_phase("load")
            self._phase = "load"
            r.load_start = self.clock()
            tasks: set[asyncio.Task[None]] = set()
            killer = None
            if self.kill is not None and self.w.kill_worker_at_seconds is not None:
                killer = asyncio.create_task(self._kill_at(self.w.kill_worker_at_seconds))
            for item in self.items:
                delay = r.load_start + item.at - self.clock()
                if delay > 0:
                    await asyncio.sleep(delay)
                if self._in_flight >= self.w.max_in_flight:
                    r.skipped += 1
                    continue
                out = Outcome(item.entry, self.clock())
                r.outcomes.append(out)
                task = asyncio.create_task(self._one(mix, item, out))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            rest = r.load_start + self.w.duration_seconds - self.clock()
            if rest > 0:
                await asyncio.sleep(rest)
            if killer is not None:
                await killer
            if tasks:
                await asyncio.wait(set(tasks), timeout=DRAIN_SECONDS)
                for task in list(tasks):
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
            r.load_end = self.clock()
            self._phase = "after"
            stop.set()
            await asyncio.gather(*probes, return_exceptions=True)
        return r

    async def _kill_at(self, offset: float) -> None:
        delay = self.result.load_start + offset - self.clock()
        if delay > 0:
            await asyncio.sleep(delay)
        assert self.kill is not None
        self.result.kill = await self.kill()

    # --- probes -------------------------------------------------------------------
    async def _probe(self, session: Any, spec: ProbeSpec, into: list[ProbeSample],
                     stop: asyncio.Event) -> None:
        period = 1.0 / spec.rate
        nxt = self.clock()
        while not stop.is_set():
            phase, started = self._phase, self.clock()
            try:
                async with asyncio.timeout(10.0):
                    await self._first_byte(session, spec.path, spec.kind)
                into.append(ProbeSample(phase, started, round(self.clock() - started, 6)))
            except Exception as exc:  # noqa: BLE001 - a failed probe is a measurement
                into.append(ProbeSample(phase, started, None, type(exc).__name__))
            nxt += period
            wait = nxt - self.clock()
            if wait < 0:  # a probe that took longer than its period does not burst after
                nxt, wait = self.clock(), 0.0
            try:
                await asyncio.wait_for(stop.wait(), wait)
            except TimeoutError:
                pass

    async def _first_byte(self, session: Any, path: str, kind: str) -> None:
        """Returns once the first event arrived (and the rest was read)."""
        if kind == "websocket":
            async with session.ws_connect(self.ws_base + path) as ws:
                await ws.receive()
                async for _ in ws:
                    pass
            return
        async with session.get(self.base + path) as resp:
            if resp.status >= 500:
                raise RuntimeError(f"HTTP {resp.status}")
            if kind == "stream":
                await resp.content.readany()
                return  # first event: drop the rest (the connection is released)
            await resp.read()

    # --- the mix ------------------------------------------------------------------
    async def _one(self, session: Any, item: Planned, out: Outcome) -> None:
        import aiohttp

        m = self.w.mix[item.entry]
        self._in_flight += 1
        try:
            timeout = m.timeout_seconds or DEFAULT_TIMEOUT
            async with asyncio.timeout(timeout):
                await self._send(session, m, item, out)
            if out.outcome == "unfinished":
                out.outcome = "ok" if out.status is not None and out.status < 400 else (
                    "error_5xx" if (out.status or 0) >= 500 else "error_4xx")
        except TimeoutError:
            out.outcome = "timeout" if m.timeout_seconds else "unfinished"
        except asyncio.CancelledError:
            out.outcome = "unfinished"
            raise
        except OffLoopback:
            out.outcome = "redirect_refused"
        except (aiohttp.ClientError, OSError, RuntimeError) as exc:
            out.outcome = "connection_error"
            out.status = None
            del exc
        finally:
            self._in_flight -= 1
            out.latency = round(self.clock() - out.started, 6)

    async def _send(self, session: Any, m: MixEntry, item: Planned, out: Outcome) -> None:
        path = m.path.replace("{n}", str(item.n))
        if m.kind == "websocket":
            await self._websocket(session, path, item.cancel, m, out)
            return
        cancel_after = m.cancel_after_seconds
        if item.cancel and cancel_after is None and m.kind in ("short", "background"):
            cancel_after = DEFAULT_SHORT_CANCEL
        if item.cancel and cancel_after is None and m.kind == "upload":
            cancel_after = m.upload_seconds / 2
        if item.cancel and cancel_after is not None:
            try:
                async with asyncio.timeout(cancel_after):
                    await self._http(session, m, path, False, out)
            except TimeoutError:
                out.outcome = "cancelled"  # the client walked away: the connection dropped
            return
        await self._http(session, m, path, item.cancel, out)

    async def _http(self, session: Any, m: MixEntry, path: str, cancel_at_first: bool,
                    out: Outcome) -> None:
        data = _slow_body(m.upload_bytes, m.upload_seconds) if m.kind == "upload" else None
        async with session.request(m.method, self.base + path, data=data) as resp:
            out.status = resp.status
            first = await resp.content.readany()
            out.first_byte = round(self.clock() - out.started, 6)
            if cancel_at_first and first:
                resp.close()  # drop the connection mid-response: a client disconnect
                out.outcome = "cancelled"
                return
            await resp.read()

    async def _websocket(self, session: Any, path: str, cancel: bool, m: MixEntry,
                         out: Outcome) -> None:
        async with session.ws_connect(self.ws_base + path) as ws:
            out.status = 101
            await ws.receive()
            out.first_byte = round(self.clock() - out.started, 6)
            if cancel:
                if m.cancel_after_seconds:
                    await asyncio.sleep(m.cancel_after_seconds)
                await ws.close(code=4000, message=b"client gave up")  # not a normal close
                out.outcome = "cancelled"
                return
            async for _ in ws:
                pass


async def _slow_body(size: int, seconds: float) -> Any:
    """``size`` bytes spread evenly over ``seconds`` (a long upload from a slow client)."""
    steps = max(1, min(200, int(seconds / 0.05)))
    chunk = max(1, size // steps)
    sent = 0
    while sent < size:
        piece = min(chunk, size - sent)
        yield b"u" * piece
        sent += piece
        if sent < size and seconds > 0:
            await asyncio.sleep(seconds / steps)
