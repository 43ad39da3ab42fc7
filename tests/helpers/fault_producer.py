"""The job producer of the fault schedule (tests/helpers/faults/): creates, cancels, recovers.

Usage: fault_producer.py CONFIG_JSON

Never a nemesis target. Until SIGUSR1 it creates ``rate`` jobs a second (``C job t``
in ``log`` once ``create_job`` returned; ``M job`` when the reply was lost after the
INSERT was sent: the row may exist) and cancels a ``p_cancel`` share of them a moment
later (``K job t`` when ``cancel_queued`` said cancelled). All the time, every
``recover_every`` seconds, it runs the recovery a deployment runs: ``recover()`` (the
unstarted claims of dead owners requeued, their running jobs marked lost) and the
backstop ``reclaim_prestart(claimed_before=now - stale)``. A line on stdin: one last
recovery pass (retried until the server answers), then one JSON line of tallies — the
exact amounts the load caused, compared with the scraped counters.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from typing import Any

from pg_claim_worker import FAST

from corevo_obs import enable_multiprocess
from corevo_obs.claims import PostgresJobStore
from corevo_obs.core.errors import BackendUnavailable


class Producer:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.store = PostgresJobStore(cfg["dsn"], table=cfg["table"], worker="producer",
                                      **FAST)
        self.fd = os.open(cfg["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.tally: Counter[str] = Counter()
        self.rng = random.Random(cfg["seed"])
        self.creating = threading.Event()
        self.creating.set()
        self.done = threading.Event()

    def _write(self, line: str) -> None:
        os.write(self.fd, f"{line} {time.monotonic()!r}\n".encode())

    def create(self) -> None:
        pending: list[tuple[float, str]] = []   # (cancel at, job)
        seq, period = 0, 1.0 / self.cfg["rate"]
        next_at = time.monotonic()
        while self.creating.is_set():
            job = f"j{seq:07d}"
            seq += 1
            try:
                self.store.create_job(job)
                self._write(f"C {job}")
                self.tally["created"] += 1
                if self.rng.random() < self.cfg["p_cancel"]:
                    pending.append((time.monotonic() + self.rng.uniform(0, 0.3), job))
            except BackendUnavailable as exc:
                self.tally["create_errors"] += 1
                if exc.maybe_committed:
                    self._write(f"M {job}")
            now = time.monotonic()
            for due in [p for p in pending if p[0] <= now]:
                pending.remove(due)
                try:
                    if self.store.cancel_queued(due[1]):
                        self._write(f"K {due[1]}")
                        self.tally["cancelled"] += 1
                except BackendUnavailable:
                    self.tally["cancel_errors"] += 1
            next_at = max(next_at + period, time.monotonic() - 1.0)
            time.sleep(max(0.0, next_at - time.monotonic()))

    def recover_once(self) -> bool:
        """One recovery pass; False if the server did not answer (tallies may be partial:
        counted then as a lower bound)."""
        try:
            found = self.store.recover()
            self.tally["reclaimed"] += found.reclaimed
            self.tally["marked_lost"] += found.lost
            stale = self.store.clock() - self.cfg["stale"]
            self.tally["reclaimed"] += self.store.reclaim_prestart(claimed_before=stale)
            return True
        except BackendUnavailable:
            self.tally["recover_errors"] += 1
            return False

    def recover(self) -> None:
        while not self.done.wait(self.cfg["recover_every"]):
            self.recover_once()


def main(cfg: dict[str, Any]) -> int:
    enable_multiprocess()   # never on a full disk: started before any fault
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    p = Producer(cfg)
    signal.signal(signal.SIGUSR1, lambda *_: p.creating.clear())
    threads = [threading.Thread(target=p.create), threading.Thread(target=p.recover)]
    for t in threads:
        t.start()
    print("ready", flush=True)
    sys.stdin.readline()
    p.creating.clear()
    p.done.set()
    for t in threads:
        t.join()
    while not p.recover_once():   # the last pass: the workers are gone by now
        time.sleep(0.2)
    p.store.close()
    print(json.dumps(dict(p.tally)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
