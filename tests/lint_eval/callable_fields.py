"""A callable kept in a field and called by an async method: ``Tool(search)`` stores
``search`` in ``__init__`` (``self.func = func``), and ``await tool.async_call()`` runs
``self.func(...)`` on the loop. The defs the tree hands to the constructor, in functions
or in a module-level registry, are what runs there: a blocking one is reported at the
call in the async method, where the fix goes (``await asyncio.to_thread(self.func)``). A
handed def that does no I/O, a coroutine function awaited, or a call offloaded to a
thread is not."""

import asyncio
import time
from collections.abc import Awaitable, Callable


class Tool:
    def __init__(self, func: Callable[..., object], name: str = "") -> None:
        self.func = func
        self.name = name

    async def async_call(self, *args: object) -> object:
        return self.func(*args)  # error: COB110 [medium]


class OffloadedTool:
    def __init__(self, func: Callable[..., object]) -> None:
        self.func = func

    async def async_call(self, *args: object) -> object:
        return await asyncio.to_thread(self.func, *args)


class Hook:
    def __init__(self, callback: Callable[[], object]) -> None:
        self.callback = callback

    async def fire(self) -> None:
        self.callback()


class AsyncHook:
    def __init__(self, callback: Callable[[], Awaitable[None]]) -> None:
        self.callback = callback

    async def fire(self) -> None:
        await self.callback()


def lookup(query: str) -> str:
    time.sleep(0.5)  # stands for a sync HTTP search
    return query


def total(a: int, b: int) -> int:
    return a + b


async def notify() -> None:
    await asyncio.sleep(0)


def tools() -> list[object]:
    return [Tool(lookup, name="search"), OffloadedTool(lookup), Hook(lambda: None)]


SAFE = [Hook(print), AsyncHook(notify)]
REGISTRY = {"add": Tool(total)}
