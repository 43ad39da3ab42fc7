"""Offloads as users write them: the callable runs in a thread, so nothing in it blocks the
loop (lambdas, functools.partial, bound methods, decorators), on any receiver for the
method-name offloads; the arguments are still evaluated on the loop."""
import asyncio
import functools
import os
from pathlib import Path

import anyio.to_thread
from asgiref.sync import sync_to_async
from starlette.concurrency import run_in_threadpool


class Store:
    def write(self, data: str) -> None:
        Path("/tmp/x").write_text(data)


@sync_to_async
def save_row(row: str) -> None:
    Path("/tmp/row").write_text(row)


async def offloaded(hass, pool, store: Store, p: str) -> None:
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, lambda: os.listdir(p))
    await loop.run_in_executor(None, functools.partial(os.remove, p))
    await asyncio.to_thread(store.write, "x")
    await asyncio.to_thread(lambda: store.write("x"))
    await anyio.to_thread.run_sync(lambda: Path(p).read_text())
    await run_in_threadpool(lambda: open(p).read())
    await sync_to_async(lambda: Path(p).unlink())()
    await sync_to_async(store.write)("x")
    await hass.async_add_executor_job(lambda: Path(p).write_text("x"))
    await hass.async_add_executor_job(Path(p).write_text, "x")
    await hass.async_add_import_executor_job(functools.partial(os.listdir, p))
    await save_row("r")
    await pool.submit_blocking(lambda: os.stat(p))  # configured in the test's offload-methods


async def evaluated_on_the_loop(hass, p: str) -> None:
    await hass.async_add_executor_job(print, os.listdir(p))  # error: COB100
    await asyncio.to_thread(open(p).read)  # error: COB100
    Store().write("x")  # error: COB110
