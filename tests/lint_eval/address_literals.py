"""A helper that parses its host as an IP address first and resolves it in DNS only when
that fails (``try: ip_address(host)`` / ``except ValueError: gethostbyname(host)``): a
caller passing an IP literal never reaches the lookup, one passing a name or an unknown
value does. A ``try`` that does more than the parse guards nothing: another statement
raises the ``ValueError`` here (``int("snmp")``)."""

import ipaddress
import socket
from ipaddress import ip_address


class Device:
    def __init__(self, host: str, port: int = 161) -> None:
        try:
            address = ip_address(host)
        except ValueError:
            address = ip_address(socket.gethostbyname(host))
        self.address = address
        self.port = port


def normalised(host: str) -> str:
    try:
        ipaddress.IPv4Address(host)
    except (ValueError, TypeError):
        return socket.gethostbyname(host)
    else:
        return host


def checked(host: str, service: str) -> int:
    try:
        ip_address(host)
        port = int(service)
    except ValueError:
        return socket.getservbyname(service)  # a name: looked up in /etc/services
    return port


async def literals() -> None:
    Device("192.0.2.1")
    Device("::1", port=1161)
    normalised("10.0.0.1")


async def names(host: str) -> None:
    Device("printer.example.org")  # error: COB110 [medium]
    Device(host)  # error: COB110 [medium]
    normalised("example.org")  # error: COB110 [medium]
    checked("10.0.0.1", "snmp")  # error: COB110 [medium]
