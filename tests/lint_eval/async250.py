"""ASYNC250: ``input()`` waits on stdin inside async def."""
import builtins


async def asks() -> None:
    input()  # error: ASYNC250
    input("name? ")  # error: ASYNC250
    builtins.input()  # error: ASYNC250


async def offloaded() -> None:
    import asyncio
    await asyncio.to_thread(input, "name? ")
