"""Sync code the event loop itself calls runs on the loop: a protocol's callbacks, and a
callable handed to ``loop.call_soon`` / ``call_later`` / ``add_reader`` (directly, as a
lambda or through ``functools.partial``)."""

import asyncio
import functools
import socket
import time


def log_line(path: str, text: str) -> None:
    with open(path, "a") as fh:
        fh.write(text)


class Echo(asyncio.Protocol):
    def data_received(self, data: bytes) -> None:
        time.sleep(0.01)  # error: COB104

    def connection_lost(self, exc: Exception | None) -> None:
        log_line("/tmp/echo.log", "lost")  # error: COB110

    def helper(self) -> None:
        time.sleep(1)  # not a callback: a plain method nobody calls on the loop


class Base(asyncio.DatagramProtocol):
    pass


class Listener(Base):
    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        socket.getfqdn(addr[0])  # error: COB102


class NotAProtocol:
    def data_received(self, data: bytes) -> None:
        time.sleep(0.01)


def start(loop: asyncio.AbstractEventLoop) -> None:
    loop.call_soon(log_line, "/tmp/a.log", "start")  # error: COB110
    loop.call_later(1.0, functools.partial(log_line, "/tmp/a.log", "later"))  # error: COB110
    loop.call_soon(lambda: time.sleep(0.1))  # error: COB104
    loop.call_soon(print, "fine")


async def watch(loop: asyncio.AbstractEventLoop, fd: int) -> None:
    loop.add_reader(fd, time.sleep, 0.1)  # error: COB104
    await asyncio.to_thread(log_line, "/tmp/a.log", "offloaded")
