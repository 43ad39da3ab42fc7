"""Drill 3's holder role: tasks that take a quota slot, call the model, give it back.

Each process runs the same work twice side by side: half its tasks take slots from the
anonymous counter, half take named leases (heartbeated). SIGKILL skips every ``finally``,
so the counter slot leaks while the lease stops heartbeating and gets reaped.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable

from ..leases import AsyncLeaseStore
from . import handlers
from .quota import AnonymousCounter, QuotaConfig, lease_store

RETRY_SECONDS = 0.05


async def _counter_task(counter: AnonymousCounter, hold: float, stop: asyncio.Event) -> None:
    while not stop.is_set():
        if not await asyncio.to_thread(counter.take):
            await asyncio.sleep(RETRY_SECONDS)
            continue
        try:
            await handlers.fake_model(hold)
        finally:
            await asyncio.to_thread(counter.give_back)


async def _lease_task(store: AsyncLeaseStore, counter: AnonymousCounter, hold: float, beat: float,
                      stop: asyncio.Event) -> None:
    while not stop.is_set():
        lease = await store.acquire()
        if lease is None:
            await asyncio.sleep(RETRY_SECONDS)
            continue
        lease.keep_alive(beat)
        try:
            await handlers.fake_model(hold)
        finally:
            await lease.release()
        await asyncio.to_thread(counter.lease_done)


async def run_holder(ns: argparse.Namespace, stop: asyncio.Event,
                     announce: Callable[..., None]) -> None:
    cfg = QuotaConfig(ns.db, ns.counter_db, ns.limit, ns.lease_timeout, ns.redis, ns.redis_key)
    counter = await asyncio.to_thread(AnonymousCounter, cfg.counter_db, cfg.limit)
    store: AsyncLeaseStore = lease_store(cfg, worker=ns.worker, asynchronous=True)
    tasks = [asyncio.create_task(_counter_task(counter, ns.hold, stop)) for _ in range(ns.tasks)]
    tasks += [asyncio.create_task(_lease_task(store, counter, ns.hold, cfg.timeout / 3, stop))
              for _ in range(ns.tasks)]
    announce()
    try:
        await asyncio.gather(*tasks)
    finally:
        await store.aclose()
        await asyncio.to_thread(counter.close)
