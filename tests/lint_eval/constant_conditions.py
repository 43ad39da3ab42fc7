"""A branch a constant test rules out cannot run, so it holds no finding: the ``else`` of
``if True:``, the body of ``if False:`` / ``if 0:`` / ``if not True:``; the live branch
is read as usual, and a test that is not a constant keeps both."""

import socket
import time

DEBUG = False


async def resolve(host: str) -> object:
    if True:
        return host
    else:
        return socket.getaddrinfo(host, 80)


async def wait_a_bit() -> None:
    if False:
        time.sleep(1)
    if 0:
        time.sleep(1)
    if not True:
        time.sleep(1)
    if not False:
        time.sleep(0.1)  # error: COB104


async def live_else(host: str) -> object:
    if False:
        return host
    else:
        return socket.getaddrinfo(host, 80)  # error: COB102


async def not_a_constant(host: str) -> object:
    if DEBUG:
        return host
    return socket.getaddrinfo(host, 80)  # error: COB102


def helper(host: str) -> object:
    if True:
        return host
    return socket.getaddrinfo(host, 80)


async def calls_helper(host: str) -> object:
    return helper(host)


def helper_if_not(host: str) -> object:
    if DEBUG:
        return host
    return socket.getaddrinfo(host, 80)


async def calls_helper_if_not(host: str) -> object:
    return helper_if_not(host)  # error: COB110
