"""A helper's blocking branch taken only when a parameter ``==`` / ``!=`` a string or number
constant: a call site passing another constant (written there, a module constant, or
carried down the chain) rules it out; the matching constant or an unknown argument keeps
it. (Already decided by narrowing.py's ``==`` / ``!=`` atoms: these twins pin it.)"""

import socket
import time

DEFAULT_HOST = "127.0.0.1"


class Node:
    def __init__(self, host: str, port: int = 0) -> None:
        if host == "localhost":
            host = socket.gethostbyname(host)
        self.host = host


class Cluster:
    def __init__(self, host: str | None = None, port: int = 0) -> None:
        if host and port:
            self.node = Node(host, port)


async def ip_node() -> Node:
    return Node("127.0.0.1", 7000)


async def module_constant_node() -> Node:
    return Node(DEFAULT_HOST, port=7000)


async def carried_down() -> Cluster:
    return Cluster("127.0.0.1", 7000)


async def local_node() -> Node:
    return Node("localhost", 7000)  # error: COB110 [medium]


async def carried_localhost() -> Cluster:
    return Cluster(host="localhost", port=7000)  # error: COB110 [medium]


async def any_node(host: str) -> Node:
    return Node(host, 7000)  # error: COB110 [medium]


def pause(mode: int) -> None:
    if 0 != mode:
        time.sleep(1)


async def no_pause() -> None:
    pause(0)


async def some_pause() -> None:
    pause(2)  # error: COB110 [medium]
