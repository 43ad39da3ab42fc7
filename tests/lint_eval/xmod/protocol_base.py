"""A protocol base of the project, in a module of its own (no ``async`` in it)."""

import asyncio


class LineProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = b""
