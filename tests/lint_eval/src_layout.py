"""Helpers of a package under ``src/`` (ruff's default import roots: the project and its
``src/``) are followed like any other: ``src/layout_pkg/storage.py`` is
``layout_pkg.storage``. The false twins: a helper there that does no I/O, the blocking one
offloaded."""

import asyncio

from layout_pkg.storage import describe, load


async def show(path: str) -> str:
    return load(path)  # error: COB110 [medium]


async def name(path: str) -> str:
    return describe(path)


async def show_offloaded(path: str) -> str:
    return await asyncio.to_thread(load, path)
