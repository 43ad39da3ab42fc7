"""A protocol whose asyncio base is in another module: the loop calls its callbacks, on
the loop (this file has no ``async`` either); a class with the same method names that is
no protocol is not called by the loop."""

import time

from .protocol_base import LineProtocol


def append(path: str, line: bytes) -> None:
    with open(path, "ab") as fh:
        fh.write(line)


class Recorder(LineProtocol):
    def data_received(self, data: bytes) -> None:  # error: COB110
        append("/tmp/recorder.log", data)

    def connection_lost(self, exc: Exception | None) -> None:  # error: COB110
        time.sleep(0.1)


class Parser:
    def data_received(self, data: bytes) -> None:
        time.sleep(0.1)
