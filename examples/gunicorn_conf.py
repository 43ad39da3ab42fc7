"""gunicorn config for examples/fastapi_app.py: 3 uvicorn workers, one metrics port.

    PROMETHEUS_MULTIPROC_DIR=/run/myapp-metrics gunicorn -c examples/gunicorn_conf.py \\
        examples.fastapi_app:app

Prometheus scrapes the master's endpoint (``$COREVO_METRICS_PORT``, default 9430): one
target per host, every worker in it once.
"""

import os

from corevo_obs.integrations.gunicorn import child_exit, post_fork, pre_fork, when_ready

bind = os.environ.get("BIND", "127.0.0.1:8000")
workers = int(os.environ.get("WORKERS", "3"))
worker_class = "uvicorn.workers.UvicornWorker"

__all__ = ["bind", "child_exit", "post_fork", "pre_fork", "when_ready", "worker_class", "workers"]
