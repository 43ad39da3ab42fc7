"""The loopback TCP proxy that the fault proxies build on (pg_proxy.py, redis_persist.py).

It listens on a free port, hands each accepted connection to ``_link`` (the subclass
connects upstream) and keeps every live socket, so a fault can cut them all at once
(``_cut``); while ``refuse`` is set new connections are closed at once. Subclasses call
``_serve()`` last in their constructor: the accept thread must not run before their own
state exists.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterable


def shut(sockets: Iterable[socket.socket]) -> None:
    """Shut both directions of each socket (the peer sees the link cut)."""
    for s in sockets:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)


class LinkProxy:
    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._links: list[socket.socket] = []
        self.refuse = False

    def _serve(self) -> None:
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:   # the listener was closed
                return
            if self.refuse:
                client.close()
            else:
                self._link(client)

    def _link(self, client: socket.socket) -> None:
        """One accepted connection: connect it upstream (``_pipe``) or close it."""
        raise NotImplementedError

    def _pipe(self, client: socket.socket, server: socket.socket) -> None:
        """Keep the link and pump both directions in threads of their own
        (``_pump(src, dst, upstream, state)``, ``state`` shared by the link's two)."""
        with self._lock:
            # checked again under the lock: a link accepted while a cut severed the
            # others (a pool refilling in the background) is refused too
            if self.refuse:
                for s in (client, server):
                    s.close()
                return
            self._links += [client, server]
        state: dict[str, bool] = {}
        for src, dst, upstream in ((client, server, True), (server, client, False)):
            threading.Thread(target=self._pump, args=(src, dst, upstream, state),
                             daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, upstream: bool,
              state: dict[str, bool]) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        shut((src, dst))

    def _cut(self, last: tuple[socket.socket, ...] = ()) -> list[socket.socket]:
        """Cut every live link; the sockets cut (forgotten). ``last`` are shut after all
        the others: the client that notices the fault through them must find every other
        link already dead (else it retries on one the cut has not reached yet)."""
        with self._lock:
            links, self._links = self._links, []
        shut([s for s in links if s not in last])
        shut(last)
        return links

    def close(self) -> None:
        self._listener.close()
        self._cut()
