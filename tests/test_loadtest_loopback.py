"""The load test never leaves loopback, even when the app under test redirects elsewhere.

A real loopback server answers every request (WebSocket handshakes included) with
``302 Location: http://<this machine's non-loopback address>:<port>/``, where a real
listener counts the connections it accepts. The driver's real aiohttp sessions and the
scrapes' urllib must open none there; the driver counts each refusal.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from corevo_obs.loadtest import observe
from corevo_obs.loadtest.driver import Driver
from corevo_obs.loadtest.server import workers_reporting
from corevo_obs.loadtest.workload import parse_workload


def _outside_address() -> str:
    """This machine's address on its default route (not loopback), or skip."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the route
        except OSError:
            pytest.skip("no non-loopback IPv4 address on this machine")
        host = str(s.getsockname()[0])
    if host.startswith("127."):
        pytest.skip("no non-loopback IPv4 address on this machine")
    return host


@contextlib.contextmanager
def _listener(host: str) -> Iterator[tuple[int, list[int]]]:
    """A TCP listener on ``host``; yields (port, accepted): accepted grows per connection."""
    sock = socket.socket()
    sock.bind((host, 0))
    sock.listen(64)
    sock.settimeout(0.1)
    accepted: list[int] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except TimeoutError:
                continue
            accepted.append(1)
            conn.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield int(sock.getsockname()[1]), accepted
    finally:
        stop.set()
        thread.join(5)
        sock.close()


@contextlib.contextmanager
def _redirector(target: str) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def _away(self) -> None:
            self.send_response(302)
            self.send_header("Location", target + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_HEAD = _away

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.timeout(60)
def test_redirects_off_loopback_are_refused_and_counted() -> None:
    outside = _outside_address()
    with _listener(outside) as (port, accepted), \
            _redirector(f"http://{outside}:{port}") as base:
        workload = parse_workload({
            "seed": 1, "duration_seconds": 1.5, "max_requests": 30, "baseline_seconds": 1,
            "probes": {"heartbeat": {"path": "/hb", "rate": 5}},
            "mix": [{"name": "short", "kind": "short", "path": "/r/{n}", "rate": 10},
                    {"name": "ws", "kind": "websocket", "path": "/ws", "rate": 3}],
        }, "redirect.toml")
        result = asyncio.run(Driver(workload, base, clock=time.monotonic).run())
        with pytest.raises(OSError):  # urllib.error.HTTPError: the 302 is the answer
            observe.fetch(base + "/metrics")
        assert workers_reporting(base + "/metrics") == set()
        assert accepted == [], f"{len(accepted)} connections left loopback"
    outcomes = [o.outcome for o in result.outcomes]
    kinds = {workload.mix[o.entry].kind for o in result.outcomes}
    assert outcomes and set(outcomes) == {"redirect_refused"}, outcomes
    assert kinds == {"short", "websocket"}, "both HTTP and WebSocket handshakes redirected"
    assert result.heartbeat and all(p.error == "OffLoopback" for p in result.heartbeat)
