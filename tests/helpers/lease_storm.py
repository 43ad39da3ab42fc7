"""One storm process: many asyncio tasks acquiring a Redis lease, holding it briefly.

Usage: lease_storm.py URL QUOTA LIMIT TIMEOUT TASKS DEADLINE TRACK_FILE
DEADLINE is a time.monotonic() value (system-wide on Linux, so the parent can compare).
Each holder appends ``E holder t`` right after its grant and ``X holder t`` right before
its release to TRACK_FILE: an independent record of who held when. Metrics go to the
multiprocess directory, so they survive a SIGKILL.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
import time

from lease_kit import store_for

from corevo_obs import enable_multiprocess
from corevo_obs.leases import AsyncRedisLeaseStore


async def holder_task(store: AsyncRedisLeaseStore, deadline: float, fd: int) -> None:
    rng = random.Random()
    while time.monotonic() < deadline:
        lease = await store.acquire()
        if lease is None:
            await asyncio.sleep(rng.uniform(0.01, 0.03))
            continue
        os.write(fd, f"E {lease.holder} {time.monotonic()!r}\n".encode())
        await asyncio.sleep(rng.uniform(0.02, 0.06))
        os.write(fd, f"X {lease.holder} {time.monotonic()!r}\n".encode())
        await lease.release()


async def main(url: str, quota: str, limit: int, ttl: float, tasks: int,
               deadline: float, track: str) -> None:
    store: AsyncRedisLeaseStore = store_for(url, quota, asynchronous=True, limit=limit,
                                            timeout=ttl)
    await store.holders()  # connected
    fd = os.open(track, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    print("ready", flush=True)
    await asyncio.gather(*(holder_task(store, deadline, fd) for _ in range(tasks)))
    os.close(fd)
    await store.aclose()


if __name__ == "__main__":
    enable_multiprocess()
    u, q, lim, to, n, dl, tr = sys.argv[1:8]
    asyncio.run(main(u, q, int(lim), float(to), int(n), float(dl), tr))
