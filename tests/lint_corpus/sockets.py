import asyncio
import socket


async def positives(host: str) -> None:
    socket.create_connection((host, 80))  # error: COB102
    s = socket.socket()
    s.connect((host, 80))  # error: COB102
    s.recv(10)  # error: COB102
    socket.getaddrinfo(host, 80)  # error: COB102


async def negatives(host: str) -> None:
    loop = asyncio.get_running_loop()
    s = socket.socket()
    s.setblocking(False)
    await loop.sock_connect(s, (host, 80))
    await loop.getaddrinfo(host, 80)
    socket.htons(80)
    blocking = socket.socket()
    blocking.recv(10, socket.MSG_DONTWAIT)  # this one call does not wait


class Notifier:
    def __init__(self) -> None:
        self._out = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._out.setblocking(False)
        self._blocking = socket.socket()

    async def send(self, data: bytes) -> None:
        self._out.sendto(data, "/tmp/x")  # non-blocking socket: cannot stall the loop
        self._blocking.sendall(data)  # error: COB102


async def local_nonblocking() -> None:
    s = socket.socket()
    s.setblocking(False)
    s.send(b"x")
