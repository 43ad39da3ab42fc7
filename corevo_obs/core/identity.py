"""Who this process is, as a bounded ``worker`` label value.

A pid is a fine default for one machine, but process managers recycle workers; set
``COREVO_WORKER`` to a slot name (``w0``..``wN``) to keep the label set bounded.
"""

from __future__ import annotations

import os
import re

__all__ = [
    "WORKER_ENV",
    "worker_name",
]


WORKER_ENV = "COREVO_WORKER"
_VALID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


def worker_name(explicit: str | None = None) -> str:
    """Return the worker label: explicit argument, then ``$COREVO_WORKER``, then ``pid<N>``."""
    from .errors import ConfigError

    if explicit is not None:
        source, value = "worker argument", explicit
    elif os.environ.get(WORKER_ENV):
        source, value = f"${WORKER_ENV}", os.environ[WORKER_ENV]
    else:
        return f"pid{os.getpid()}"
    if not _VALID.match(value):
        raise ConfigError(
            f"worker name {value!r} must be 1-64 characters of letters, digits, '_.:-'",
            source=source,
        )
    return value
