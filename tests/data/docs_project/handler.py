import asyncio


def crunch(n: int) -> int:
    return sum(range(n))


async def handle(n: int) -> int:
    return await asyncio.to_thread(crunch, n)
