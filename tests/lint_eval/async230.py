"""ASYNC230: opening a file with a sync API inside async def."""
import io
from io import open as io_open


async def opens(p: str) -> None:
    open(p)  # error: ASYNC230
    with open(p, "rb"):  # error: ASYNC230
        pass
    io.open(p)  # error: ASYNC230
    io_open(p)  # error: ASYNC230
    io.open_code(p)  # error: ASYNC230


async def offloaded(p: str) -> None:
    import asyncio
    fh = await asyncio.to_thread(open, p)
    await asyncio.to_thread(fh.close)
    io.BytesIO(b"in memory")
    io.StringIO("in memory")
