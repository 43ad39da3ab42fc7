"""A recording Alertmanager webhook receiver: every alert of every notification, with
the receiver path it came to (``/pager``, ``/chat``, ``/tickets``), its status and the
time it arrived, so a test asserts on what would have paged someone."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Delivery:
    """One alert as a notification carried it."""

    at: float  #: time.monotonic() when it arrived
    path: str
    status: str  #: firing | resolved
    labels: dict[str, str]
    starts_at: str
    fingerprint: str
    annotations: dict[str, str]

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def episode(self) -> tuple[str, str]:
        """One firing episode of one alert: Prometheus keeps startsAt while it fires."""
        return self.fingerprint, self.starts_at

    def describe(self) -> str:
        subject = ",".join(f"{k}={v}" for k, v in sorted(self.labels.items())
                           if k not in ("alertname", "severity"))
        said = "".join(f" {k}={self.annotations[k]}" for k in ("stall_age", "frozen_line")
                       if self.annotations.get(k))
        return f"{self.name}{{{subject}}} {self.status} via {self.path}{said}"


class Receiver:
    """``with Receiver() as r:`` serves on a free loopback port (``r.base``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: list[Delivery] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                owner._record(self.path, json.loads(body or b"{}"))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _record(self, path: str, payload: dict[str, Any]) -> None:
        now = time.monotonic()
        with self._lock:
            for alert in payload.get("alerts", []):
                self._seen.append(Delivery(now, path, str(alert.get("status")),
                                           dict(alert.get("labels", {})),
                                           str(alert.get("startsAt")),
                                           str(alert.get("fingerprint")),
                                           dict(alert.get("annotations", {}))))

    def deliveries(self, since: float = 0.0) -> list[Delivery]:
        with self._lock:
            return [d for d in self._seen if d.at >= since]

    def episodes(self) -> dict[tuple[str, str], Delivery]:
        """Every firing episode, as first delivered."""
        first: dict[tuple[str, str], Delivery] = {}
        for d in self.deliveries():
            if d.status == "firing":
                first.setdefault(d.episode, d)
        return first

    def still_firing(self) -> list[Delivery]:
        """Alerts whose last notification said firing (no resolved one came after)."""
        last: dict[str, Delivery] = {}
        for d in self.deliveries():
            last[d.fingerprint] = d
        return [d for d in last.values() if d.status == "firing"]

    def wait(self, check: Callable[[list[Delivery]], bool], timeout: float) -> bool:
        """Poll until ``check(deliveries)`` holds (True) or ``timeout`` passes (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check(self.deliveries()):
                return True
            time.sleep(0.2)
        return check(self.deliveries())
