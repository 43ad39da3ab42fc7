"""Name lookups whose flags rule the lookup out: ``getnameinfo`` with both numeric flags
(host and service), ``getaddrinfo`` with ``AI_NUMERICHOST`` (a name fails at once)."""
import socket
from socket import NI_NUMERICHOST, NI_NUMERICSERV


async def numeric(address: tuple[str, int, int, int], host: str) -> None:
    socket.getnameinfo(address, socket.NI_NUMERICHOST | socket.NI_NUMERICSERV)
    socket.getnameinfo(address, NI_NUMERICSERV | NI_NUMERICHOST)
    socket.getaddrinfo(host, 443, flags=socket.AI_NUMERICHOST)
    socket.getaddrinfo(host, 443, 0, 0, 0, socket.AI_NUMERICHOST | socket.AI_PASSIVE)


async def looked_up(address: tuple[str, int, int, int], host: str) -> None:
    socket.getnameinfo(address, socket.NI_NUMERICHOST)  # error: COB102
    socket.getnameinfo(address, socket.NI_NUMERICSERV)  # error: COB102
    socket.getnameinfo(address, 0)  # error: COB102
    socket.getaddrinfo(host, 443, flags=socket.AI_PASSIVE)  # error: COB102
    socket.getaddrinfo(host, 443)  # error: COB102
