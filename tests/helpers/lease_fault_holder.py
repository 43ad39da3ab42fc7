"""One process of loss-aware lease holders for the fault suite (tests/test_fault_leases.py).

Usage: lease_fault_holder.py CONFIG_JSON

Each of ``holders`` asyncio tasks loops until ``until`` (a ``time.monotonic()`` value;
system-wide on Linux, so the parent can compare) or until the parent sends SIGUSR1 — so
a run can last as long as the faults take to heal:
``async with store.hold()``, then work
for a random time — with probability ``p_long`` a ``long`` one, longer than the lease
timeout, so holds span the faults. The tracker is independent of the store: right after
the grant the task appends ``E holder t planned`` (enter, planned work) to this
process's own file, and in the body's ``finally`` —
reached also when the lease is lost and the body cancelled — ``X holder t`` (exit). The
parent reads only these files. With ``keys`` (a sharded quota) each hold names a caller
key, skewed: half of them ``t0``; ``pause`` adds a random think time after each hold.
``skew`` shifts the store's client clock (``clock=``) by
that many seconds. At exit one JSON line on stdout: holds, and losses by reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import time
from collections import Counter
from typing import Any

from lease_kit import store_for

from corevo_obs.core.errors import LeaseLost, LeaseRejected


async def holder(store: Any, cfg: dict[str, Any], fd: int, seed: int, stats: Counter[str],
                 stopped: asyncio.Event) -> None:
    rng = random.Random(seed)
    while time.monotonic() < cfg["until"] and not stopped.is_set():
        lo, hi = cfg["long"] if rng.random() < cfg["p_long"] else cfg["short"]
        work = rng.uniform(lo, hi)
        # a sharded quota: a caller key from a skewed set (half of the holds use key 0)
        keyed = {"key": f"t{0 if rng.random() < 0.5 else rng.randrange(cfg['keys'])}"} \
            if cfg.get("keys") else {}
        try:
            async with store.hold(wait=cfg["wait"], poll=cfg["poll"], **keyed) as lease:
                os.write(fd, f"E {lease.holder} {time.monotonic()!r} {work!r}\n".encode())
                try:
                    await asyncio.sleep(work)
                finally:
                    os.write(fd, f"X {lease.holder} {time.monotonic()!r}\n".encode())
            stats["completed"] += 1
        except LeaseLost as exc:
            stats[f"lost_{exc.reason}"] += 1
        except LeaseRejected:
            stats["rejected_waits"] += 1
        if cfg.get("pause"):  # think time between holds: demand that comes and goes
            await asyncio.sleep(rng.uniform(0, cfg["pause"]))


async def main(cfg: dict[str, Any]) -> None:
    skew = float(cfg.get("skew", 0.0))
    store = store_for(cfg["where"], cfg["quota"], asynchronous=True, limit=cfg["limit"],
                      timeout=cfg["timeout"], heartbeat_interval=cfg["interval"],
                      margin=cfg["margin"], worker=cfg["worker"],
                      clock=lambda: time.time() + skew, **cfg.get("waits", {}))
    fd = os.open(cfg["track"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    stats: Counter[str] = Counter()
    stopped = asyncio.Event()  # SIGUSR1 from the parent: finish the current holds, stop
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, stopped.set)
    print("ready", flush=True)
    await asyncio.gather(*(holder(store, cfg, fd, cfg["seed"] * 100 + i, stats, stopped)
                           for i in range(cfg["holders"])))
    os.close(fd)
    await store.aclose()
    print(json.dumps(dict(stats)), flush=True)


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
