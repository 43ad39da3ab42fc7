"""A thread queue's ``get`` right after its ``empty()`` was checked in the same function
waits most likely never (``while q.empty(): await asyncio.sleep(...)``): still reported,
at medium, since another consumer may take the item first. Twin: an unchecked ``get``
(high), and a check on another queue."""
import asyncio
import queue


async def drain(inbox: queue.SimpleQueue) -> object:
    while inbox.empty():
        await asyncio.sleep(0.05)
    return inbox.get()  # error: COB108 [medium]


async def blind(inbox: queue.Queue, other: queue.Queue) -> object:
    if other.qsize():
        return other.get()  # error: COB108 [medium]
    return inbox.get()  # error: COB108 [high]
