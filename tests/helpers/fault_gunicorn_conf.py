"""gunicorn config and WSGI app for the fault schedule's gunicorn mode (fault_run.py).

    gunicorn -c tests/helpers/fault_gunicorn_conf.py fault_gunicorn_conf:app

The corevo-obs gunicorn hooks (slot names, multiprocess mode, the master's metrics
endpoint with compaction) plus, in each worker, the load of fault_worker.py in a thread
of its own, under the label ``g<pid>`` (one per incarnation: a SIGKILLed worker's
replacement gets a new one, so its counters can be matched to its own records). The
master restarts killed workers; a graceful stop ends the load in ``worker_exit``.
Settings from the environment: ``FAULT_BIND``, ``FAULT_WORKERS``, ``FAULT_CFG`` (the
worker config of fault_worker.py without its per-process fields, plus ``records``).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any

from corevo_obs.integrations.gunicorn import child_exit, post_fork, pre_fork, when_ready

bind = os.environ.get("FAULT_BIND", "127.0.0.1:0")
workers = int(os.environ.get("FAULT_WORKERS", "3"))
worker_class = "sync"
graceful_timeout = 30
_load: dict[str, Any] = {}

__all__ = ["app", "bind", "child_exit", "graceful_timeout", "post_fork", "post_worker_init",
           "pre_fork", "when_ready", "worker_class", "worker_exit", "workers"]


def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok\n"]


def post_worker_init(worker: Any) -> None:
    """Worker, once booted: start its load (holders and lanes) in a thread."""
    from fault_worker import work  # beside this file, on the workers' path

    base = json.loads(os.environ["FAULT_CFG"])
    records = base.pop("records")
    label = f"g{os.getpid()}"
    cfg = {**base, "worker": label, "track": f"{records}/{label}.track",
           "jobs": f"{records}/{label}.jobs", "seed": base["seed"] * 100000 + os.getpid()}
    loop = asyncio.new_event_loop()
    stopped = asyncio.Event()
    thread = threading.Thread(target=loop.run_until_complete, args=(work(cfg, stopped),),
                              daemon=True)
    _load.update(loop=loop, stopped=stopped, thread=thread)
    thread.start()


def worker_exit(server: Any, worker: Any) -> None:
    """Worker, on a graceful exit: finish the current holds and jobs, then go."""
    if "thread" in _load:
        _load["loop"].call_soon_threadsafe(_load["stopped"].set)
        _load["thread"].join(timeout=20)
