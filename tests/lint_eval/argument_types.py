"""What a caller's argument is, when it is not a constant: a list / tuple / set display
has a type and a size (``QClient(worker_list=[("10.0.0.1", 8888)])`` is true, so the
discovery branch under ``else`` never runs; ``[]`` is false), and a parameter annotated
with a builtin type (``addr: Tuple[str, int]``, never rebound, not optional) is no
``str`` for an ``isinstance`` test. An unannotated, optional or rebound parameter keeps
every path, except for tests made before the body first rebinds it, outside loops."""

import socket
from typing import Optional, Tuple


def discover() -> list[tuple[str, int]]:
    return [(str(a[4][0]), 8888) for a in socket.getaddrinfo("workers.lan", 8888)]


class QClient:
    def __init__(self, worker_list: list[tuple[str, int]] | None = None) -> None:
        if worker_list:
            self.workers = worker_list
        else:
            self.workers = discover()


class Address:
    def __init__(self, addr: object) -> None:
        if isinstance(addr, tuple):
            self.host = str(addr[0])
        elif isinstance(addr, str):
            self.host = socket.gethostbyname(addr)
        else:
            self.host = str(addr)


def host_of(addr: object) -> str:
    if isinstance(addr, str):  # tested before the body splits ``addr``: the caller's value
        addr, _, _port = addr.partition(":")
        return socket.gethostbyname(addr)
    return str(addr)


def settle(addr: object) -> str:
    for _ in range(2):  # in a loop the second test reads the rebound value
        if isinstance(addr, str):
            return socket.gethostbyname(addr)
        addr = f"{addr}.lan"
    return str(addr)


async def split_later() -> None:
    host_of(("10.0.0.1", 47808))
    host_of("bbmd.lan:47808")  # error: COB110 [medium]
    settle(("h", 1))  # error: COB110 [medium]


async def listed() -> None:
    QClient(worker_list=[("10.0.0.1", 8888)])
    QClient([("10.0.0.1", 8888), ("10.0.0.2", 8888)])
    Address(("10.0.0.1", 47808))


async def received(data: bytes, addr: Tuple[str, int], port: int) -> None:
    Address(addr)
    Address(port)


async def unknown(workers: list[tuple[str, int]], name: str, maybe: Optional[Tuple[str, int]],
                  anything: object) -> None:
    QClient()  # error: COB110 [medium]
    QClient(worker_list=[])  # error: COB110 [medium]
    QClient(workers)  # error: COB110 [medium]
    Address(name)  # error: COB110 [medium]
    Address(maybe)  # error: COB110 [medium]
    Address(anything)  # error: COB110 [medium]


async def rebound(addr: Tuple[str, int], by_name: bool) -> None:
    if by_name:
        addr = f"{addr[0]}.lan"  # type: ignore[assignment]
    Address(addr)  # error: COB110 [medium]
