"""A real worker with loop health and the corevo aiomonitor, driven from stdin.

Usage: monitor_worker.py PORT WEBUI_PORT LEASE_DB
Holds one lease of quota ``gpu`` (a real SQLite store; a second one is taken and given
back), stalls once in ``slow_handler``, then prints ``{"ready": true}``. Each stdin line
is a command: ``freeze S`` blocks the loop S seconds, ``quit`` stops.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from corevo_obs import install_loop_health
from corevo_obs.leases import AsyncSqliteLeaseStore
from corevo_obs.monitor import register_inspectable, start_monitor, track_leases


class Pool:
    """A stand-in offload provider with a fixed state."""

    def snapshot(self) -> dict[str, object]:
        return {"in_flight": 3, "limit": 4, "waiting": 2, "sunk": 1, "closed": False}


def slow_handler(seconds: float) -> None:
    time.sleep(seconds)  # SLOW-HANDLER


async def main(port: int, webui_port: int, lease_db: str) -> None:
    health = install_loop_health(worker="m0", interval=0.01)
    # before the first await: importing aiomonitor (aiohttp, ssl) would be a stall of its own
    mon = start_monitor(health, port=port, webui_port=webui_port)
    register_inspectable("offload", "s3", Pool())
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

    def on_line() -> None:
        line = sys.stdin.readline().split()
        if not line or line[0] == "quit":
            done.set_result(None) if not done.done() else None
        elif line[0] == "freeze":
            print(json.dumps({"freezing": True}), flush=True)
            slow_handler(float(line[1]))

    loop.add_reader(sys.stdin.fileno(), on_line)
    print(json.dumps({"ready": True}), flush=True)
    await done
    mon.close()
    await lease.release()
    await health.stop()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]))
