"""A claim worker that keeps going while its PostgreSQL server restarts under it.

Usage: pg_claim_worker.py DSN TABLE WORKER LANES WORK_S
Each lane (a thread) takes candidates, claims them and, for each win, prints one JSON line
``{"won", "epoch", "token"}`` *before* doing anything else with it (its own record of what
it won), then starts and finishes it with a WORK_S pause between. ``BackendUnavailable``
is counted and the lane goes on; once the queue is empty it gives back the claims whose
outcome it never learned, and races for them again. When no lane finds a candidate twice
in a row it prints ``{"done", "errors", "max_error_s", "unstarted", "given_back"}``.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from prometheus_client import CollectorRegistry

from corevo_obs.claims import JobStore, PostgresJobStore
from corevo_obs.core.errors import BackendUnavailable

FAST: dict[str, Any] = {"statement_timeout": 1.0, "pool_timeout": 1.0, "connect_timeout": 2,
        "reconnect_timeout": 2.0}
P = ParamSpec("P")
T = TypeVar("T")


class Lane:
    def __init__(self, store: JobStore, work: float, out: threading.Lock) -> None:
        self.store, self.work, self.out = store, work, out
        self.errors = 0
        self.max_error_s = 0.0
        self.unstarted: list[str] = []
        self.given_back = 0

    def _call(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T | None:
        t0 = time.monotonic()
        try:
            return fn(*args, **kwargs)
        except BackendUnavailable:
            self.errors += 1
            self.max_error_s = max(self.max_error_s, time.monotonic() - t0)
            time.sleep(0.05)
            return None

    def run(self, lane: int, lanes: int) -> None:
        idle = 0
        while idle < 2:
            ids = self._call(self.store.candidates, 40)
            if ids is None:
                continue
            mine = ids[lane::lanes] or ids
            idle = idle + 1 if not ids else 0
            for job_id in mine:
                won = self._call(self.store.claim, job_id)
                if won is None or won.claim is None:
                    continue
                with self.out:
                    print(json.dumps({"won": job_id, "epoch": won.claim.epoch,
                                      "token": won.claim.token}), flush=True)
                started = self._call(self.store.start, won.claim, f"x-{won.claim.token}")
                if started is None or not started.started:
                    self.unstarted.append(job_id)
                    continue
                time.sleep(self.work)
                for _ in range(100):     # a finish is fenced by its execution: safe to retry
                    if self._call(self.store.finish, won.claim, f"x-{won.claim.token}",
                                  "completed") is not None:
                        break
            if not ids:   # the claims whose outcome was lost go back to the queue
                given = self._call(self.store.give_back_undecided) or 0
                self.given_back += given
                idle = 0 if given else idle
                time.sleep(0.1)


def main() -> None:
    dsn, table, worker, lanes, work = sys.argv[1:6]
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)   # each retry would print
    store = PostgresJobStore(dsn, table=table, worker=worker, registry=CollectorRegistry(),
                             **FAST)
    out = threading.Lock()
    runners = [Lane(store, float(work), out) for _ in range(int(lanes))]
    threads = [threading.Thread(target=r.run, args=(i, len(runners)))
               for i, r in enumerate(runners)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps({"done": worker, "owner": store.owner,
                      "errors": sum(r.errors for r in runners),
                      "max_error_s": max(r.max_error_s for r in runners),
                      "unstarted": [j for r in runners for j in r.unstarted],
                      "given_back": sum(r.given_back for r in runners)}), flush=True)
    store.close()


if __name__ == "__main__":
    main()
