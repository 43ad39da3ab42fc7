"""COB108: waiting on another thread or process on the loop: a thread-safe queue's get,
an event's wait, a lock's acquire, a thread's join, a concurrent future's result (not
asyncio's), an executor's shutdown; the forms that return at once are fine."""

import asyncio
import concurrent.futures
import queue
import threading

jobs: queue.Queue[int] = queue.Queue()
ready = threading.Event()
pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)


def compute() -> int:
    return 42


async def consume() -> int:
    return jobs.get()  # error: COB108


async def consume_nowait() -> int | None:
    try:
        return jobs.get(block=False) + jobs.get_nowait() + jobs.get(False) + jobs.get(timeout=0)
    except queue.Empty:
        return None


async def produce(item: int) -> None:
    jobs.put(item)  # an unbounded queue's put never waits


async def wait_ready() -> None:
    ready.wait()  # error: COB108
    ready.wait(0)  # a check, no wait


async def from_thread(loop: asyncio.AbstractEventLoop) -> int:
    future = pool.submit(compute)
    return future.result()  # error: COB108


async def threadsafe(coro, loop: asyncio.AbstractEventLoop) -> object:
    return asyncio.run_coroutine_threadsafe(coro, loop).result()  # error: COB108


async def asyncio_future(loop: asyncio.AbstractEventLoop) -> int:
    fut = loop.run_in_executor(pool, compute)
    await fut
    return fut.result()  # an asyncio future: done, so result() returns at once


async def stop() -> None:
    pool.shutdown()  # error: COB108
    pool.shutdown(wait=False)


async def join(worker: threading.Thread) -> None:
    worker.join()  # error: COB108


async def wait_all(futures: list[concurrent.futures.Future[int]]) -> None:
    concurrent.futures.wait(futures)  # error: COB108


async def guarded(lock: threading.Lock) -> bool:
    return lock.acquire(blocking=False)
