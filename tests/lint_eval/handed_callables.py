"""Sync functions handed to an async def of the tree that calls them on the loop (a retry
wrapper's ``return operation()``): the call of the parameter runs what the callers hand
in, whether the caller is a coroutine or sync code that starts one (``loop.create_task(
every(5, check))``). Twins: a wrapper that offloads it, one that awaits it, one whose callers hand only
functions that do not block, and one that rebinds the parameter first."""
import asyncio
import sqlite3
import time


async def with_retry(operation, attempts: int = 3):
    for _ in range(attempts):
        try:
            return operation()  # error: COB110 [medium]
        except sqlite3.OperationalError:
            await asyncio.sleep(0.1)
    raise RuntimeError("gave up")


async def offloaded(operation):
    return await asyncio.to_thread(operation)


async def awaited(operation):
    return await operation()


async def timed(operation):
    started = time.monotonic()
    result = operation()
    return result, time.monotonic() - started


async def wrapped(operation):
    operation = asyncio.to_thread(operation)
    return await operation


def settle() -> None:
    time.sleep(0.5)


def answer() -> int:
    return 42


async def fetch() -> int:
    return 1


class Store:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    async def _execute_with_retry(self, operation):
        return operation()  # error: COB110 [medium]

    def _count(self) -> int:
        return self.conn.execute("select count(*) from t").fetchone()[0]

    async def count(self) -> int:
        return await self._execute_with_retry(self._count)

    async def save(self, row: tuple) -> None:
        def insert() -> None:
            self.conn.execute("insert into t values (?)", row)
            self.conn.commit()

        await offloaded(insert)
        await wrapped(insert)
        await timed(answer)
        await awaited(fetch)


async def main() -> None:
    await with_retry(operation=settle)
    await timed(len)


async def every(interval: float, callback, *args):
    while True:
        callback(*args)  # error: COB110 [medium]
        await asyncio.sleep(interval)


async def every_offloaded(interval: float, callback, *args):
    while True:
        await asyncio.to_thread(callback, *args)
        await asyncio.sleep(interval)


def start(loop: asyncio.AbstractEventLoop) -> None:
    """Sync code that hands a def to a coroutine: the coroutine runs on the loop."""
    loop.create_task(every(1.0, settle))
    loop.create_task(every_offloaded(1.0, settle))
