"""Task handlers of the demo service, the good and the bad.

``persist_artifact_blocking`` is failure class 1 on purpose: a sync HTTP call inside
``async def``. ``persist_artifact`` is the fix: the same call moved to a bounded thread pool.
"""

from __future__ import annotations

import asyncio
import hashlib
import urllib.request

from ..offload import OffloadAdapter


def _fetch(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return bytes(resp.read())


async def persist_artifact_blocking(url: str) -> str:
    payload = _fetch(url)  # noqa: COB110 -- the incident this demo reproduces, on purpose
    return hashlib.sha256(payload).hexdigest()


async def persist_artifact(url: str, object_store: OffloadAdapter) -> str:
    payload = await object_store.run(_fetch, url)
    return hashlib.sha256(payload).hexdigest()


async def fake_model(latency: float) -> str:
    """A model with fixed latency: takes model variance out of the picture."""
    await asyncio.sleep(latency)
    return "ok"
