import asyncio
import time
from time import sleep
from time import sleep as snooze


async def positives() -> None:
    time.sleep(1)  # error: COB104
    sleep(1)  # error: COB104
    snooze(0.1)  # error: COB104


async def negatives() -> None:
    await asyncio.sleep(1)
    time.monotonic()

    def pause() -> None:
        time.sleep(1)

    await asyncio.to_thread(pause)
