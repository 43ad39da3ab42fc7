"""A TCP proxy in front of PostgreSQL that can lose one reply after the server sent it.

``cut_reply_to(marker)``: the next connection whose client sends bytes containing
``marker`` has its link cut when the server's answer arrives; the answer is dropped.
In autocommit the server has committed by then, so the client sees exactly the fault
"COMMIT done, reply lost with the connection". With ``then_refuse`` every other link is
cut too and new connections fail until ``refuse`` is set back to False.
"""

from __future__ import annotations

import contextlib
import socket

from tests.helpers.tcp_proxy import LinkProxy, shut


class PgProxy(LinkProxy):
    def __init__(self, upstream_port: int) -> None:
        super().__init__()
        self.upstream = ("127.0.0.1", upstream_port)
        self._marker: bytes | None = None
        self._then_refuse = False
        self.cuts = 0
        self._serve()

    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def cut_reply_to(self, marker: bytes, *, then_refuse: bool = False) -> None:
        with self._lock:
            self._marker, self._then_refuse = marker, then_refuse

    def _link(self, client: socket.socket) -> None:
        self._pipe(client, socket.create_connection(self.upstream))

    def _pump(self, src: socket.socket, dst: socket.socket, upstream: bool,
              state: dict[str, bool]) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if upstream:
                    with self._lock:
                        if self._marker is not None and self._marker in data:
                            self._marker, state["armed"] = None, True
                elif state.get("armed"):
                    self.cuts += 1
                    if self._then_refuse:
                        with self._lock:
                            self.refuse = True
                        self._cut(last=(src, dst))
                    break       # the server answered: drop the answer with the link
                dst.sendall(data)
        shut((src, dst))
