"""A worker whose imports of redis and psycopg take DELAY seconds each, wherever they run.

``top``: the store classes are imported where the module starts (as a host does), then
the stores are built and used on the loop with loop health installed. ``in-loop``: the
control, the same import made on the loop, which a working hook turns into a stall.
Prints one JSON line: the stalls the watchdog counted, and which ones were imports.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.abc
import json
import os
import sys
import time
from collections.abc import Sequence
from types import ModuleType

from prometheus_client import CollectorRegistry

DELAY = float(os.environ.get("SLOW_IMPORT_DELAY", "0.8"))
SLOW = frozenset({"redis", "psycopg", "psycopg_pool"})


class SlowImports(importlib.abc.MetaPathFinder):
    """Sleeps in the import of each slow package (once: later imports hit sys.modules)."""

    def find_spec(self, name: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> None:
        if name in SLOW:
            time.sleep(DELAY)
        return None


sys.meta_path.insert(0, SlowImports())
MODE = sys.argv[1]
if MODE == "top":
    from corevo_obs.cancel import RedisCancelBus
    from corevo_obs.claims import AsyncPostgresJobStore
    from corevo_obs.leases import AsyncRedisLeaseStore

from corevo_obs import install_loop_health  # noqa: E402


async def main(redis_url: str, pg_dsn: str) -> dict[str, object]:
    registry = CollectorRegistry()
    health = install_loop_health(registry=registry, worker="s0", stall_threshold=0.25,
                                 log_interval=0)
    if MODE == "in-loop":
        importlib.import_module("redis")
    else:
        store = AsyncRedisLeaseStore("q", redis_url, limit=2, timeout=10)
        await store.provision()
        async with store.hold(wait=2):
            await asyncio.sleep(0.01)
        await store.aclose()
        bus = RedisCancelBus(redis_url)
        await bus.aclose()
        jobs = AsyncPostgresJobStore(pg_dsn or "postgresql://127.0.0.1:1/none", owner="s0")
        if pg_dsn:
            await jobs.setup()
            job = await jobs.create_job()
            assert (await jobs.get(job)) is not None
        await jobs.aclose()
    await asyncio.sleep(0.3)  # the watchdog records an ended stall on its next look
    await health.aclose()
    return {
        "counted": registry.get_sample_value("corevo_event_loop_stalls_total",
                                             {"worker": "s0"}),
        "stalls": [{"seconds": r.duration, "cause": r.cause, "where": r.where,
                    "in_slow_import": any(f.function == "find_spec" and f.filename == __file__
                                          for f in r.frames)}
                   for r in health.reports],
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[2], sys.argv[3]))))
