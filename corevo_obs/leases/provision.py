"""Deploy-time provisioning of a quota, and awaitables that cannot be dropped silently.

A Redis quota's restart fence refuses grants for one lease timeout whenever its marker
key is missing or was written by another server process (its run id): after a restart, a
failover or a flush (what the fence is for) and also at the very first use of a new
quota. ``provision()`` (and ``corevo-obs leases provision``) writes the marker of a quota
that has none, once, at deploy time: from then on a fence only ever means "this backend
lost its state". It never touches an existing marker, so running it on every deploy is
harmless while Redis keeps its data — and after a restart from persistence, which
restores the marker, it does not end the fence either — but running it right after Redis
lost its keys ends that fence, which is why it is a deploy step and not something the
stores do on their own.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Coroutine, Generator
from typing import Any, Generic, TypeVar

log = logging.getLogger("corevo_obs")
T = TypeVar("T")


class MustAwait(Generic[T]):
    """An awaitable for a one-shot effect (``declare_fresh``, ``provision``) on an async
    store: dropped without ``await`` it did nothing, so it logs an error and warns
    instead of passing silently as a bare coroutine would."""

    def __init__(self, coro: Coroutine[Any, Any, T], call: str) -> None:
        self._coro = coro
        self._call = call
        self._awaited = False

    def __await__(self) -> Generator[Any, None, T]:
        self._awaited = True
        return self._coro.__await__()

    def __del__(self) -> None:
        if self._awaited:
            return
        self._coro.close()   # our own message below replaces "coroutine never awaited"
        text = f"{self._call} was called without await and did nothing: write await {self._call}"
        log.error("corevo-obs: %s", text)
        warnings.warn(text, RuntimeWarning, stacklevel=2)


def provision_command(quota: str, shards: int | None = None) -> str:
    """The deploy step for a quota (``--shards`` for a sharded one)."""
    return (f"corevo-obs leases provision {quota} --redis URL"
            + (f" --shards {shards}" if shards is not None else ""))


def fence_hint(quota: str, store: str, command: str) -> str:
    """The one-time log line of a fenced admission: what the fence means, what to run."""
    return (f"corevo-obs quota {quota!r} ({store}) refused a grant: restart fence for one "
            "lease timeout (its marker was missing, or another server wrote it: a quota "
            "never provisioned, or Redis restarted, failed over or lost its state). For a "
            "new quota, provision it at deploy time: "
            f"{command} (or store.provision())")
