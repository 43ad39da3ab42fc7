"""A file object handed to asyncio's pipe transports (``loop.connect_write_pipe`` /
``connect_read_pipe``) is only a descriptor holder: the transport does its own
non-blocking I/O, and wrapping the descriptor resolves no path, so the wrap is no finding.
A wrap whose object is also read or written synchronously, or an ``open`` of a path spelled
as a string (a FIFO's open can wait), stays reported."""

import asyncio
import os
import sys


async def stdout_writer(loop: asyncio.AbstractEventLoop) -> None:
    await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(sys.stdout.fileno(), "wb"))


async def stdin_reader(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    pipe = os.fdopen(fd, "rb")
    await loop.connect_read_pipe(asyncio.Protocol, pipe)
    other = open(fd)
    await loop.connect_read_pipe(asyncio.Protocol, other)


async def also_written(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    out = os.fdopen(fd, "wb")  # error: COB100
    out.write(b"hello\n")  # error: COB100
    await loop.connect_write_pipe(asyncio.Protocol, out)


async def fifo_path(loop: asyncio.AbstractEventLoop) -> None:
    await loop.connect_read_pipe(asyncio.Protocol, open("/run/app.fifo", "rb"))  # error: COB100


async def not_a_transport(fd: int) -> None:
    handle = os.fdopen(fd, "rb")  # error: COB100
    print(handle)
