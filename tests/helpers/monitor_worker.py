"""A real worker with loop health and the corevo aiomonitor, driven from stdin.

Usage: monitor_worker.py PORT WEBUI_PORT LEASE_DB
Holds one lease of quota ``gpu`` (a real SQLite store; a second one is taken and given
back), runs a real ``OffloadAdapter`` ``s3`` (limit 3) with five calls blocked in their
threads: three in flight (one of them sunk, one with its caller cancelled) and two
waiting; stalls once in ``slow_handler``, then prints ``{"ready": true}``. Each stdin line
is a command: ``freeze S`` blocks the loop S seconds, ``open`` lets the blocked thread
calls return, ``release`` gives the lease back, ``quit`` stops.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time

import aiomonitor  # noqa: F401 - imported before the loop runs: on it, a stall of its own

from corevo_obs import OffloadAdapter, install_loop_health
from corevo_obs.integrations.monitor import install_monitor, track_leases, track_offload
from corevo_obs.leases import AsyncSqliteLeaseStore


async def blocked_offloads(adapter: OffloadAdapter, gate: threading.Event) -> list[asyncio.Task]:
    """Five calls blocked in threads; the first operation sinks, the second caller leaves."""
    calls = [asyncio.create_task(adapter.run(gate.wait)) for _ in range(5)]
    while adapter.in_flight < 3 or adapter.waiting < 2:  # noqa: ASYNC110 - adapter state
        await asyncio.sleep(0.01)
    first, _, _ = adapter._running  # the operation tasks, in admission order
    first.cancel()  # what loop shutdown does to an operation: its slot sinks
    calls[1].cancel()  # a caller that gives up: its thread call runs on
    while adapter.sunk < 1:  # noqa: ASYNC110 - adapter state
        await asyncio.sleep(0.01)
    return calls


def slow_handler(seconds: float) -> None:
    time.sleep(seconds)  # SLOW-HANDLER


async def main(port: int, webui_port: int, lease_db: str) -> None:
    health = install_loop_health(worker="m0", interval=0.01)
    mon = install_monitor(health, port=port, webui_port=webui_port)
    adapter = OffloadAdapter(name="s3", max_in_flight=3, on_background_error=lambda e: None)
    track_offload(adapter)
    gate = threading.Event()
    calls = await blocked_offloads(adapter, gate)
    store = AsyncSqliteLeaseStore("gpu", lease_db, limit=2, worker="m0")
    track_leases(store)
    lease = await store.acquire()
    assert lease is not None
    other = await store.acquire()
    assert other is not None and await other.release()
    await asyncio.sleep(0.05)
    slow_handler(0.3)  # noqa: COB110 - the stall the monitor shows
    await asyncio.sleep(0.1)
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    async def drain() -> None:
        gate.set()
        await asyncio.gather(*calls, return_exceptions=True)
        while adapter.in_flight:  # noqa: ASYNC110 - the orphaned calls' threads
            await asyncio.sleep(0.01)
        print(json.dumps({"opened": adapter.in_flight == 0}), flush=True)

    async def give_back() -> None:
        print(json.dumps({"released": await lease.release()}), flush=True)

    def on_line() -> None:
        line = sys.stdin.readline().split()
        if not line or line[0] == "quit":
            done.set_result(None) if not done.done() else None
        elif line[0] == "freeze":
            print(json.dumps({"freezing": True}), flush=True)
            slow_handler(float(line[1]))
        elif line[0] == "open":
            background.add(loop.create_task(drain()))
        elif line[0] == "release":
            background.add(loop.create_task(give_back()))

    background: set[asyncio.Task[None]] = set()

    loop.add_reader(sys.stdin.fileno(), on_line)
    print(json.dumps({"ready": True}), flush=True)
    await done
    mon.close()
    gate.set()
    await adapter.aclose()
    await lease.release()
    await health.aclose()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]))
