import os
import time


async def silenced(p: str) -> None:
    time.sleep(1)  # noqa: COB104
    os.listdir(p)  # noqa: COB100, COB104
    os.remove(
        p
    )  # noqa: COB100


async def not_silenced(p: str) -> None:
    time.sleep(1)  # noqa: ASYNC251  # error: COB104
    os.listdir(p)  # noqa: COB104  # error: COB100
    open(p)  # noqa  # error: COB100
