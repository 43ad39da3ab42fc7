"""An owner process for the cancel tests: claims one job, runs it under a lease and an inbox.

Usage: cancel_worker.py CONFIG_JSON. Prints one JSON object per line (claimed, start,
running, input, dropped, stopped, late). Reads commands from stdin: ``go`` (continue after
a claim-only stall), ``drop SECONDS`` (close the wake-up channel for that long), ``exit``
(leave after the run stopped, with ``linger``).
Metrics go to PROMETHEUS_MULTIPROC_DIR through the default registry.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import Any

from lease_kit import store_for

from corevo_obs.cancel import CommandInbox, Execution, SideEffectGate, execution_holder
from corevo_obs.cancel.bus import CancelBus
from corevo_obs.claims import AsyncJobStore, AsyncPostgresJobStore, AsyncSqliteJobStore
from corevo_obs.leases import AsyncLeaseStore


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def stdin_lines(loop: asyncio.AbstractEventLoop) -> asyncio.Queue[str]:
    """Lines from stdin, read by a thread so the loop never blocks on them."""
    lines: asyncio.Queue[str] = asyncio.Queue()

    def read() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(lines.put_nowait, line.strip())

    threading.Thread(target=read, daemon=True).start()
    return lines


def backends(cfg: dict[str, Any]) -> tuple[CancelBus, AsyncLeaseStore]:
    opts = {"limit": 1, "timeout": cfg["lease_timeout"], "worker": cfg["worker"]}
    if cfg["backend"] == "redis":
        from corevo_obs.cancel.redis_bus import RedisCancelBus

        return (RedisCancelBus(cfg["redis_url"]),
                store_for(cfg["redis_url"], cfg["quota"], asynchronous=True, **opts))
    from corevo_obs.cancel import SqliteCancelBus

    return SqliteCancelBus(cfg["db"]), store_for(cfg["db"], cfg["quota"], asynchronous=True,
                                                 **opts)


async def control(inbox: CommandInbox, lines: asyncio.Queue[str]) -> None:
    while True:
        words = (await lines.get()).split()
        if words and words[0] == "drop":
            await inbox.drop(float(words[1]))
            emit("dropped")


async def work(run: Execution) -> None:
    """Stand-in for an agent loop: forever busy, reporting every input it is handed."""
    while True:
        payload = await run.inputs.get()
        emit("input", payload=payload, epoch=run.claim.epoch)


async def main(cfg: dict[str, Any]) -> None:
    opts = {"table": cfg["table"], "worker": cfg["worker"]}
    jobs: AsyncJobStore = (AsyncPostgresJobStore(cfg["pg_dsn"], **opts) if cfg.get("pg_dsn")
                           else AsyncSqliteJobStore(cfg["db"], **opts))
    bus, leases = backends(cfg)
    inbox = CommandInbox(bus, jobs, reconnect=cfg.get("reconnect", 1.0))
    await inbox.start()
    lines = stdin_lines(asyncio.get_running_loop())
    won = await jobs.claim(cfg["job"])
    assert won.claim is not None, "the job was not claimable"
    claim = won.claim
    if cfg.get("stall"):
        emit("claimed", owner=claim.owner, epoch=claim.epoch)
        while await lines.get() != "go":
            pass
    started = await jobs.start(claim)
    emit("start", outcome=started.outcome, epoch=claim.epoch)
    if not started.started:  # reclaimed while stalled: claim the next generation
        again = await jobs.claim(cfg["job"])
        assert again.claim is not None
        claim = again.claim
        started = await jobs.start(claim)
    assert started.execution_id is not None
    lease = await leases.acquire(holder=execution_holder(inbox.owner, started.execution_id))
    assert lease is not None, "quota full"
    ctl = asyncio.get_running_loop().create_task(control(inbox, lines))
    emit("running", owner=inbox.owner, epoch=claim.epoch, execution=started.execution_id,
         holder=lease.holder)
    stop = await inbox.run(claim, started.execution_id, lease, work,
                           heartbeat=cfg["heartbeat"])
    emit("stopped", state=stop.state, path=stop.path, latency=stop.latency)
    allowed = await SideEffectGate(bus, inbox.observer).allowed(f"{started.execution_id}:1")
    emit("late", allowed=allowed)
    ctl.cancel()
    if cfg.get("linger"):  # keep listening until told to exit
        while await lines.get() != "exit":
            pass
    await inbox.aclose()
    await bus.aclose()
    await leases.aclose()
    await jobs.aclose()


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
