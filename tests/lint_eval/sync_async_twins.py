"""Sync dispatchers that serve a sync and an async client from one helper: ``return
inner_async() if isinstance(client, AioClient) else inner()``. A coroutine that awaits
the helper's result gets the coroutine arm (the sync arm's result is no awaitable), so
the sync arm's sleep does not run for it; one that calls the helper without awaiting it
takes whichever arm, so the sync one is reported. A helper that returns no coroutine is
followed as usual, awaited or not."""

import asyncio
import time
from collections.abc import Awaitable, Callable


class Client:
    pass


class AioClient:
    pass


def wait_for(condition: Callable[[], bool]) -> None:
    while not condition():
        time.sleep(0.1)


async def wait_for_async(condition: Callable[[], Awaitable[bool]]) -> None:
    while not await condition():
        await asyncio.sleep(0.1)


def ready(client: object) -> object:
    def inner() -> None:
        wait_for(lambda: True)

    async def inner_async() -> None:
        async def condition() -> bool:
            return True

        await wait_for_async(condition)

    return inner_async() if isinstance(client, AioClient) else inner()


async def always() -> bool:
    return True


def settled(client: object) -> object:
    if isinstance(client, AioClient):
        return wait_for_async(always)
    return wait_for(lambda: True)


def slow(client: object) -> object:
    time.sleep(1)
    return client


async def awaited(client: AioClient) -> None:
    await ready(client)
    await settled(client)
    await asyncio.gather(ready(client))


async def called(client: AioClient) -> None:
    ready(client)  # error: COB110 [medium]
    settled(client)  # error: COB110 [medium]


async def awaited_plain(client: AioClient) -> None:
    await slow(client)  # error: COB110 [medium]
