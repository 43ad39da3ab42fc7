import asyncio
import functools
import os
import time

import anyio.to_thread
import trio

from corevo_obs.offload import OffloadAdapter


class Service:
    def __init__(self) -> None:
        self._offload = OffloadAdapter(max_in_flight=4)

    async def save(self, p: str) -> None:
        await self._offload.run(lambda: open(p, "w").close())
        await self._offload.run(os.remove, p)


async def wrappers(p: str, adapter: OffloadAdapter) -> None:
    loop = asyncio.get_running_loop()
    await asyncio.to_thread(lambda: time.sleep(1))
    await loop.run_in_executor(None, lambda: time.sleep(1))
    await anyio.to_thread.run_sync(lambda: os.listdir(p))
    await trio.to_thread.run_sync(functools.partial(lambda q: os.stat(q), p))
    await adapter.run(lambda: open(p).read())
    await asyncio.to_thread(functools.partial(open, p))


async def nested_defs(p: str) -> None:
    def read() -> str:
        with open(p) as fh:
            return fh.read()

    def write() -> None:
        os.remove(p)

    await asyncio.to_thread(read)  # handed to the wrapper: runs in a thread
    write()  # error: COB110


async def lambdas_on_the_loop(paths: list[str]) -> None:
    sorted(paths, key=lambda q: os.stat(q).st_mtime)  # error: COB100
    (lambda: time.sleep(1))()  # error: COB104
    await asyncio.to_thread(open(paths[0]).read)  # error: COB100


async def evaluated_before_offload(p: str) -> None:
    await asyncio.to_thread(print, os.listdir(p))  # error: COB100
