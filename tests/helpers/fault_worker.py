"""One app worker of the fault schedule (tests/helpers/faults/): leases, claims, metrics.

Usage: fault_worker.py CONFIG_JSON

In multiprocess mode (``enable_multiprocess``: a refused start on a full metrics disk
exits 75 with one line, or with ``start_on_full`` goes on with its values in memory,
as a gunicorn worker does), under its own ``worker`` label (one per incarnation, so the
scraped counters can be matched to this process's own records), it runs until SIGUSR1:

- ``holders`` loss-aware lease holders on the Redis quota (the tasks of
  lease_fault_holder.py: ``E``/``X`` lines in ``track``, the independent tracker);
- ``lanes`` claim threads on the PostgreSQL job table. Each lane appends to ``jobs``:
  ``W job epoch t`` after a win, ``S job execution t [r]`` just before the job's side
  effect (``r``: the start CAS was learned by reading the row back after a lost reply,
  so the store did not count it), ``F job t`` once ``finish`` said completed; first of
  all ``R t``, when the worker is ready.

Its clients run ``skew`` seconds ahead (``clock=``). At exit one JSON line of stats.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from lease_fault_holder import holder
from lease_kit import store_for
from pg_claim_worker import FAST

from corevo_obs import enable_multiprocess
from corevo_obs.claims import JobStore, PostgresJobStore
from corevo_obs.core import promclient
from corevo_obs.core.errors import BackendUnavailable, MetricsDirError

P = ParamSpec("P")
T = TypeVar("T")
REFUSED = 75  # enable_multiprocess refused the directory (full disk): not a crash


class Lane:
    """One claim thread: claim, start (the fence), side effect, finish, retried through
    outages; every step it is sure of goes to the jobs file before the next one."""

    def __init__(self, store: JobStore, cfg: dict[str, Any], fd: int, seed: int,
                 stop: threading.Event, stats: Counter[str]) -> None:
        self.store, self.cfg, self.fd, self.stop, self.stats = store, cfg, fd, stop, stats
        self.rng = random.Random(seed)

    def _write(self, line: str) -> None:
        os.write(self.fd, f"{line} {time.monotonic()!r}\n".encode())

    def _call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | None:
        try:
            return fn(*args, **kwargs)
        except BackendUnavailable:
            self.stats["db_errors"] += 1
            self.stop.wait(0.05)
            return None

    def _started_by_readback(self, job: str, execution: str) -> bool:
        """A start whose reply never came: ask the row until the server answers."""
        while True:
            try:
                row = self.store.get(job)
            except BackendUnavailable:
                time.sleep(0.05)
                continue
            return row is not None and row.execution_id == execution

    def run(self) -> None:
        work = self.cfg["work"]
        while not self.stop.is_set():
            ids = self._call(self.store.candidates, 20)
            if ids is None:
                continue
            if not ids:
                self._call(self.store.give_back_undecided)
                self.stop.wait(0.05)
                continue
            self.rng.shuffle(ids)
            for job in ids[:4]:
                if self.stop.is_set():
                    break
                won = self._call(self.store.claim, job)
                if won is None or won.claim is None:
                    continue
                claim = won.claim
                self._write(f"W {job} {claim.epoch}")
                execution = f"{self.store.owner}.{claim.token[:8]}"
                try:
                    started = self.store.start(claim, execution).started
                    readback = ""
                except BackendUnavailable:
                    self.stats["db_errors"] += 1
                    started, readback = self._started_by_readback(job, execution), " r"
                if not started:
                    self.stats["fenced"] += 1
                    continue
                self._write(f"S {job} {execution}{readback}")
                time.sleep(self.rng.uniform(*work))  # the side effect
                while self._call(self.store.finish, claim, execution, "completed") is None:
                    pass  # a finish is fenced by its execution: safe to retry
                self._write(f"F {job}")
                self.stats["completed"] += 1


async def work(cfg: dict[str, Any], stopped: asyncio.Event) -> Counter[str]:
    """The worker's load until ``stopped``: lease holders on this loop, lanes in threads.
    Also what each gunicorn worker runs (fault_gunicorn_conf.py)."""
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)   # each retry would print
    skew = float(cfg["skew"])
    stats: Counter[str] = Counter()

    def clock() -> float:
        return time.time() + skew

    leases = store_for(cfg["redis"], cfg["quota"], asynchronous=True, limit=cfg["limit"],
                       timeout=cfg["timeout"], heartbeat_interval=cfg["interval"],
                       margin=cfg["margin"], worker=cfg["worker"], clock=clock,
                       socket_timeout=0.3, connect_timeout=0.2)
    while not stopped.is_set():  # started while PostgreSQL is down: wait, as apps do
        try:
            jobs = await asyncio.to_thread(
                PostgresJobStore, cfg["dsn"], table=cfg["table"], worker=cfg["worker"],
                clock=clock, **FAST)
            break
        except BackendUnavailable:
            await asyncio.sleep(0.2)
    else:
        return stats
    track = os.open(cfg["track"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    jobs_fd = os.open(cfg["jobs"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    halt = threading.Event()
    lanes = [threading.Thread(target=Lane(jobs, cfg, jobs_fd, cfg["seed"] * 1000 + i, halt,
                                          stats).run) for i in range(cfg["lanes"])]
    for t in lanes:
        t.start()
    os.write(jobs_fd, f"R {time.monotonic()!r}\n".encode())   # at work from here
    holding = {**cfg, "until": float("inf")}
    await asyncio.gather(*(holder(leases, holding, track, cfg["seed"] * 100 + i, stats, stopped)
                           for i in range(cfg["holders"])))
    halt.set()
    for t in lanes:
        await asyncio.to_thread(t.join)
    await leases.aclose()
    jobs.close()
    os.close(track)
    os.close(jobs_fd)
    return stats


async def main(cfg: dict[str, Any]) -> int:
    try:
        enable_multiprocess()
    except MetricsDirError as exc:
        if not cfg.get("start_on_full"):
            print(f"refused: {exc}", flush=True)
            return REFUSED
        # what the gunicorn hook does (a worker must boot): values in memory until room
        print(f"started without room: {exc}", file=sys.stderr, flush=True)
        promclient.use_multiprocess_values()
    stopped = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, stopped.set)
    # the parent starts us with SIGUSR1 blocked: one sent before the handler existed is
    # pending, and delivered now instead of killing the process
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
    stats = await work(cfg, stopped)
    print(json.dumps(dict(stats)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(json.loads(sys.argv[1]))))
