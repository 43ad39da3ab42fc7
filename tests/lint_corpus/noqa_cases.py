import os
import time


async def silenced(p: str) -> None:
    time.sleep(1)  # noqa: COB104
    os.listdir(p)  # noqa: COB100, COB104
    os.remove(
        p
    )  # noqa: COB100
    time.sleep(1)  # noqa: ASYNC251 (flake8-async's and ruff's code of this rule)
    open(p)  # noqa


async def not_silenced(p: str) -> None:
    time.sleep(1)  # noqa: ASYNC230  # error: COB104
    os.listdir(p)  # noqa: COB104  # error: COB100
    open(p)  # noqa: E501  # error: COB100
