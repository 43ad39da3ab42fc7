"""gunicorn config the load test serves aiohttp apps with: the suite's hooks, nothing else.

``gunicorn -c python:corevo_obs.loadtest.gunicorn_conf -k aiohttp.GunicornWebWorker ...``:
the master serves every worker's metrics on ``$COREVO_METRICS_PORT`` and names workers
``w0``..``wN-1`` (a replacement takes the dead worker's name).
"""

from corevo_obs.integrations.gunicorn import child_exit, post_fork, pre_fork, when_ready

__all__ = ["child_exit", "post_fork", "pre_fork", "when_ready"]
