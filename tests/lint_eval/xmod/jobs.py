"""Thread-starting decorators of another module of the tree (xmod/background.py) are read
from their code like the same module's: a def they decorate runs off the loop. The false
twin: a decorator there that calls the function in place keeps the chain."""
import time

from .background import counted, in_background, in_pool


@in_background
def reindex() -> None:
    time.sleep(1)


@in_pool
def compact() -> None:
    time.sleep(1)


@counted
def vacuum() -> None:
    time.sleep(1)


async def nightly() -> None:
    reindex()
    await compact()
    vacuum()  # error: COB110 [medium]
