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
import threading


class PgProxy:
    def __init__(self, upstream_port: int) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._marker: bytes | None = None
        self._then_refuse = False
        self.cuts = 0
        self.refuse = False
        self._links: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def cut_reply_to(self, marker: bytes, *, then_refuse: bool = False) -> None:
        with self._lock:
            self._marker, self._then_refuse = marker, then_refuse

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self.refuse:
                client.close()
                continue
            server = socket.create_connection(self.upstream)
            with self._lock:
                # checked again under the lock: a link accepted while the cut severed the
                # others (a pool refilling in the background) is refused too
                if self.refuse:
                    for s in (client, server):
                        s.close()
                    continue
                self._links += [client, server]
            state = {"armed": False}
            threading.Thread(target=self._pump, args=(client, server, state, True),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, state, False),
                             daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, state: dict[str, bool],
              upstream: bool) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if upstream:
                    with self._lock:
                        if self._marker is not None and self._marker in data:
                            self._marker, state["armed"] = None, True
                elif state["armed"]:
                    self.cuts += 1
                    if self._then_refuse:
                        self._sever(refuse=True)
                    break       # the server answered: drop the answer with the link
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def _sever(self, *, refuse: bool = False) -> None:
        with self._lock:
            self.refuse = self.refuse or refuse
            for s in self._links:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self._listener.close()
        self._sever()
