"""A statement after ``return`` / ``raise`` / ``continue`` / ``break`` in the same block
never runs: a blocking call there is no finding, and a sync helper whose only blocking
call is unreachable is no chain edge. The statements before the exit, and a block the
exit does not end (the other branch of an ``if``), are read as usual."""

import socket
import time


async def after_return(x: int) -> int:
    try:
        with open("/dev/null"):  # error: COB100
            return x
            time.sleep(0.1)
    finally:
        pass


async def after_raise() -> None:
    raise RuntimeError("no")
    time.sleep(1)


async def after_continue_and_break(items: list[int]) -> None:
    for item in items:
        if item:
            continue
            time.sleep(item)
        else:
            time.sleep(item)  # error: COB104
        while True:
            break
            socket.getaddrinfo("example.com", 80)
    time.sleep(0.1)  # error: COB104


def helper_returns_first(host: str) -> str:
    return host
    socket.gethostbyname(host)


async def calls_helper_returns_first(host: str) -> str:
    return helper_returns_first(host)


def helper_returns_late(host: str) -> str:
    if host:
        return host
    return socket.gethostbyname(host)


async def calls_helper_returns_late(host: str) -> str:
    return helper_returns_late(host)  # error: COB110

