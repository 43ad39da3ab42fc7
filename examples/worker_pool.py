"""A plain asyncio worker pool beside a web app: N processes, one loop each, running the
claims worker loop (examples/claims_worker.py), with its own identity and scrape target.

Run it beside the web app (docs/integrations.md, "A plain asyncio worker pool")::

    PROMETHEUS_MULTIPROC_DIR=/run/myapp-jobs-metrics \\
        python -m examples.worker_pool sqlite:///tmp/jobs.db --workers 2 --port 9431

- **identity**: each worker takes a reusable slot ``job0``..``job{N-1}`` (a worker
  restarted after a crash takes its predecessor's name), so the label set stays bounded
  and never collides with the web workers' ``w0``..;
- **metrics dir**: the pool's own ``$PROMETHEUS_MULTIPROC_DIR``, never the web app's;
- **one target**: the supervisor (not a writer) serves the directory's aggregate on
  ``--port``, Prometheus scrapes it as its own job (``job="jobs"``).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import signal
import time
from multiprocessing.process import BaseProcess

from corevo_obs import MetricsServer, StageRecorder, enable_multiprocess, install_loop_health
from corevo_obs.claims import AsyncJobStore, Job
from corevo_obs.integrations.worker_slots import claim_worker_slot

from .claims_worker import Cadence, worker_loop

SLOT_PREFIX = "job"


def open_store(url: str) -> AsyncJobStore:
    """Called before the loop runs: the backend's import (psycopg) must not be a stall."""
    if url.startswith("sqlite:///"):
        from corevo_obs.claims import AsyncSqliteJobStore

        return AsyncSqliteJobStore(url.removeprefix("sqlite://"))
    from corevo_obs.claims import AsyncPostgresJobStore

    return AsyncPostgresJobStore(url)


async def serve(store: AsyncJobStore, cadence: Cadence) -> None:
    """One worker process's loop: loop health, one stages kind per job, the loop."""
    health = install_loop_health(project_roots=[os.path.dirname(__file__)])
    recorder = StageRecorder(kinds={"job"})
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)

    async def run(job: Job) -> None:
        task = recorder.task("job", accepted_at=job.created_at)
        task.started()
        with task.activate():
            await asyncio.sleep(0.01)              # the job's work
            task.first_event()
        task.finish("completed")

    async with store as jobs:
        await worker_loop(jobs, run, stop, cadence)
    await health.aclose()


def worker_main(url: str, poll: float) -> None:
    claim_worker_slot(prefix=SLOT_PREFIX)          # before any metric: names this process
    enable_multiprocess()
    asyncio.run(serve(open_store(url), Cadence(poll=poll)))


def supervise(url: str, workers: int, port: int, poll: float) -> None:
    """Start the workers, restart any that dies, serve the pool's metrics; SIGTERM ends."""
    spawn = multiprocessing.get_context("spawn")   # a fresh interpreter: no inherited loop
    server = MetricsServer(port=port, scope="host", compact_every=30).start()
    print(f"metrics at {server.url}", flush=True)
    running: list[BaseProcess] = []
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        while not stopping:
            running = [p for p in running if p.is_alive()]
            while len(running) < workers:
                proc = spawn.Process(target=worker_main, args=(url, poll), daemon=True)
                proc.start()
                running.append(proc)
            time.sleep(0.2)
    finally:
        for child in running:
            child.terminate()
        for child in running:
            child.join(10)
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="sqlite:///PATH or a postgresql:// DSN")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--port", type=int, default=9431)
    parser.add_argument("--poll", type=float, default=0.5)
    args = parser.parse_args()
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        parser.error("set PROMETHEUS_MULTIPROC_DIR to the pool's own metrics directory")
    supervise(args.url, args.workers, args.port, args.poll)


if __name__ == "__main__":
    main()
