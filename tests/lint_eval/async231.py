"""ASYNC231: wrapping a file descriptor in a sync file object inside async def."""
import os
from os import fdopen


async def wraps(fd: int) -> None:
    os.fdopen(fd)  # error: ASYNC231
    fdopen(fd, "rb")  # error: ASYNC231


async def offloaded(fd: int) -> None:
    import asyncio
    await asyncio.to_thread(os.fdopen, fd)
