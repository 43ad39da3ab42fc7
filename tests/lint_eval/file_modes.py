"""What a file object was opened for decides whether closing it waits: close() flushes
what was written, so closing a file opened read-only, or created and never written, does
not block; closing one written to does, and so does one whose mode the lint cannot read
(a parameter, a mode computed at run time) or that some binding opened otherwise."""

import asyncio
import gzip
from typing import BinaryIO


class Sender:
    """A file sender in the style of an XMPP in-band-bytestream client: the file is
    opened in the constructor, read chunk by chunk on the loop, closed at the end."""

    def __init__(self, path: str) -> None:  # error: COB110
        self.file = open(path, "rb")
        self.log = open(path + ".log", "a")

    async def start(self) -> None:
        try:
            self.file.read(4096)  # error: COB100 [high]
        finally:
            self.file.close()
            self.log.write("sent\n")  # error: COB100
            self.log.close()  # error: COB100 [high]


async def touch(path: str) -> None:
    fh = await asyncio.to_thread(open, path, "w")
    fh.close()


async def read_and_close(path: str) -> bytes:
    fh = await asyncio.to_thread(open, path)
    try:
        return fh.read()  # error: COB100
    finally:
        fh.close()


async def compressed(path: str) -> None:
    fh = await asyncio.get_running_loop().run_in_executor(None, gzip.open, path)
    fh.close()


async def write_and_close(path: str) -> None:
    fh = await asyncio.to_thread(open, path, mode="w")
    fh.write("x")  # error: COB100
    fh.close()  # error: COB100 [high]


async def handed_on(path: str, sink: object) -> None:
    fh = await asyncio.to_thread(open, path, "wb")
    await asyncio.to_thread(sink.dump, fh)  # type: ignore[attr-defined]
    fh.close()  # error: COB100 [high]


async def mode_from_a_parameter(path: str, mode: str) -> None:
    fh = await asyncio.to_thread(open, path, mode)
    fh.close()  # error: COB100 [medium]


async def bound_twice(path: str, other: BinaryIO) -> None:
    fh = await asyncio.to_thread(open, path, "rb")
    if not path:
        fh = await asyncio.to_thread(open, path, "r+b")
        fh.write(b"x")  # error: COB100
    fh.close()  # error: COB100


async def explicit_close_in_with(path: str) -> None:
    with open(path) as fh:  # error: COB100
        fh.close()
