"""Drill 3: quota holders crash (SIGKILL) without giving their slot back.

Holder processes run two identical workloads side by side on one global quota: one
takes slots from an anonymous counter (INCR/DECR on a SQLite row), the other takes named
leases (the real lease store, SQLite or Redis). The orchestrator SIGKILLs a holder now
and then and restarts it, as a process manager would, and samples both schemes: the
counter's leaked slots never come back, the dead holders' leases are reaped after their
heartbeat timeout.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from typing import Any, Final

from ..leases import HolderId, LeaseStore, holder_alive
from ..observer import AcquireOutcome, Observer
from .context import DemoContext
from .metrics_read import counter_total
from .procs import Child
from .quota import AnonymousCounter, QuotaConfig, lease_store

LIMIT: Final = 4
HOLD_SECONDS: Final = 0.25
SAMPLE_SECONDS: Final = 0.25
RATE_WINDOW: Final = 1.0
STOP_GRACE: Final = 5.0  # holders finish their current hold and release


class _ReapCount(Observer):
    """The orchestrator's own store reports nothing but the ghosts its probe reaped."""

    def __init__(self) -> None:
        self.reaped = 0

    def lease_acquired(self, quota: str, outcome: AcquireOutcome, *, reaped: int = 0,
                       held: int | None = None, limit: int | None = None,
                       seconds: float | None = None) -> None:
        self.reaped += reaped


class _Timeline:
    """Samples both schemes: slots in use, ghosts, and busy slots (completions x hold)."""

    def __init__(self, counter: AnonymousCounter, store: LeaseStore, ctx: DemoContext) -> None:
        self.counter = counter
        self.store = store
        self.ctx = ctx
        self.t0 = time.monotonic()
        self.samples: list[dict[str, Any]] = []
        self.kills = 0

    def _busy(self, key: str, now: float, done: int) -> float:
        past = [s for s in self.samples if now - self.t0 - s["t"] <= RATE_WINDOW]
        if not past or now - self.t0 - past[0]["t"] <= 0:
            return 0.0
        rate: float = (done - past[0][key]) / (now - self.t0 - past[0]["t"])
        return round(rate * HOLD_SECONDS, 2)

    def sample(self) -> None:
        now = time.monotonic()
        counts = self.counter.read()
        members = self.store.holders()
        ghosts = sum(1 for h, _ in members if holder_alive(h) is False)
        s: dict[str, Any] = {
            "t": round(now - self.t0, 2),
            "counter_used": counts["counter"][0],
            "counter_done": counts["counter"][1],
            "leases_held": len(members),
            "lease_ghosts": ghosts,
            "leases_done": counts["leases"][1],
        }
        s["counter_busy"] = self._busy("counter_done", now, s["counter_done"])
        s["leases_busy"] = self._busy("leases_done", now, s["leases_done"])
        self.samples.append(s)
        self.ctx.progress.status(
            f"counter: {s['counter_used']}/{LIMIT} taken, {s['counter_busy']:.1f} busy | "
            f"leases: {s['leases_held']}/{LIMIT} held ({ghosts} ghosts), "
            f"{s['leases_busy']:.1f} busy | kills {self.kills}")

    def run_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self.sample()
            time.sleep(min(SAMPLE_SECONDS, max(0.0, left)))

    def mean(self, key: str, since: float, until: float) -> float:
        vals = [s[key] for s in self.samples if since <= s["t"] <= until]
        return round(sum(vals) / len(vals), 2) if vals else 0.0


def _leases_by_pid(store: LeaseStore) -> Counter[int]:
    ids = (HolderId.parse(h) for h, _ in store.holders())
    return Counter(h.pid for h in ids if h is not None)


def _victim(holders: list[Child], store: LeaseStore) -> int:
    """The holder with the most leases right now: a crash mid-task, not between tasks."""
    held = _leases_by_pid(store)
    return max(range(len(holders)), key=lambda i: held[holders[i].pid])


def _reap_leftovers(store: LeaseStore) -> None:
    """Wait out the timeout of anything still listed (a holder cut off at stop leaves a
    fresh ghost), then acquire once: that acquire reaps, and the slot goes straight back.
    """
    members = store.holders()
    if members:
        newest = max(t for _, t in members)
        time.sleep(max(0.0, newest + store.timeout - store.server_time() + 0.1))
    lease = store.acquire()
    if lease is not None:
        lease.release()


def run(ctx: DemoContext) -> dict[str, Any]:
    timeout, kills, every, warm = (1.0, 3, 0.8, 1.5) if ctx.short else (2.0, 6, 2.0, 3.0)
    n = max(2, ctx.workers)
    backend = "redis" if ctx.redis_url else "sqlite"
    ctx.progress.step(f"quota holders SIGKILLed (limit {LIMIT}, {n} holders, {kills} kills, "
                      f"leases on {backend}, timeout {timeout:.0f}s)")
    cfg = QuotaConfig(str(ctx.workdir / "leases.db"), str(ctx.workdir / "counter.db"), LIMIT,
                      timeout, ctx.redis_url,
                      f"corevo:demo:{uuid.uuid4().hex[:12]}" if ctx.redis_url else None)
    counter = AnonymousCounter(cfg.counter_db, LIMIT, create=True)
    probe = _ReapCount()
    store: LeaseStore = lease_store(cfg, worker="demo", observer=probe)
    store.declare_fresh()  # a key made up for this run: no holder from before can exist
    args = ["--role", "holder", *cfg.argv(), "--hold", str(HOLD_SECONDS)]
    holders: list[Child] = [ctx.children.spawn(f"w{i}", *args, *ctx.port_args(i))
                            for i in range(n)]
    for c in holders:
        ctx.children.ready(c)
    try:
        tl = _Timeline(counter, store, ctx)
        tl.run_for(warm)
        events: list[dict[str, Any]] = []
        for _ in range(kills):
            slot = _victim(holders, store)
            victim = holders[slot]
            ctx.children.kill(victim)
            ghosts = _leases_by_pid(store)[victim.pid]
            tl.kills += 1
            events.append({"t": round(time.monotonic() - tl.t0, 2), "worker": victim.name,
                           "pid": victim.pid, "ghost_leases": ghosts})
            ctx.progress.event(f"SIGKILL {victim.name} (pid {victim.pid}) holding {ghosts} "
                               "lease(s); restarted")
            holders[slot] = ctx.children.spawn(victim.name, *args, *ctx.port_args(slot))
            tl.run_for(every)
        last_kill = time.monotonic() - tl.t0
        ctx.progress.event(f"no more kills; watching {2 * timeout + 1.0:.0f}s more: the last "
                           "ghosts' heartbeat timeout passes, the counter stays leaked")
        tl.run_for(2 * timeout + 1.0)
        end = time.monotonic() - tl.t0
        ctx.children.stop(holders, grace=STOP_GRACE)
        leaked = counter.read()["counter"][0]
        _reap_leftovers(store)
        ghosts_left = len(store.holders())
        reaped = counter_total(ctx.workdir / "metrics", "corevo_lease_reaped_total") + probe.reaped
    finally:
        if ctx.redis_url:
            getattr(store, "client").delete(*getattr(store, "keys"))  # noqa: B009 - Redis only
        store.close()
        counter.close()
    after = (last_kill + timeout + 0.5, end)
    result: dict[str, Any] = {
        "limit": LIMIT, "backend": backend, "lease_timeout_seconds": timeout,
        "holders": [c.name for c in holders], "kills": events,
        "counter": {
            "leaked_slots": leaked, "free_at_end": LIMIT - leaked,
            "busy_slots_before": tl.mean("counter_busy", RATE_WINDOW, warm),
            "busy_slots_after": tl.mean("counter_busy", *after),
        },
        "leases": {
            "ghost_leases": sum(int(e["ghost_leases"]) for e in events), "reaped": reaped,
            "ghosts_left": ghosts_left, "free_at_end": LIMIT - ghosts_left,
            "busy_slots_before": tl.mean("leases_busy", RATE_WINDOW, warm),
            "busy_slots_after": tl.mean("leases_busy", *after),
        },
        "timeline": tl.samples,
    }
    ctx.progress.done(f"counter leaked {leaked}/{LIMIT}; leases reaped {reaped}, "
                      f"{ghosts_left} ghosts left")
    return result
