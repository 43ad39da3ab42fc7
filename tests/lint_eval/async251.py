"""ASYNC251: ``time.sleep`` inside async def sleeps the whole event loop."""
import time
from time import sleep
from time import sleep as nap


async def sleeps() -> None:
    time.sleep(1)  # error: ASYNC251
    sleep(0.1)  # error: ASYNC251
    nap(0)  # error: ASYNC251


async def fine() -> None:
    import asyncio
    await asyncio.sleep(1)
    time.monotonic()
