"""The example Alertmanager config on a real Alertmanager: a critical alert that resolves
two seconds after it fired (a frozen worker's CorevoLoopFrozen, ended by gunicorn's kill)
still reaches the pager, and so does its resolution; a warning that resolves inside its
route's group_wait is not sent (what group_wait is for)."""

from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.conftest import _need, free_port

pytestmark = pytest.mark.system

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "alerts" / "alertmanager.example.yml"


class Receiver:
    """A webhook receiver recording (path, status, alertname) of each notification."""

    def __init__(self) -> None:
        self.got: list[tuple[str, str, str]] = []
        seen = self.got

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                for a in body["alerts"]:
                    seen.append((self.path, a["status"], a["labels"]["alertname"]))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@contextlib.contextmanager
def alertmanager(tmp: Path, receiver_port: int) -> Iterator[str]:
    exe = shutil.which("prometheus-alertmanager") or shutil.which("alertmanager")
    if exe is None:
        _need("alertmanager not installed (apt-get install prometheus-alertmanager)")
    config = tmp / "am.yml"
    config.write_text(EXAMPLE.read_text().replace("127.0.0.1:9095",
                                                  f"127.0.0.1:{receiver_port}"))
    port = free_port()
    proc = subprocess.Popen(
        [exe, f"--config.file={config}", f"--storage.path={tmp / 'data'}",
         f"--web.listen-address=127.0.0.1:{port}", "--cluster.listen-address=",
         "--log.level=warn"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{base}/-/ready", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise AssertionError("alertmanager did not start") from None
                time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(10)


def _post(base: str, name: str, severity: str, *, ends: datetime | None = None) -> None:
    now = datetime.now(UTC)
    alert = {"labels": {"alertname": name, "severity": severity, "job": "api",
                        "worker": "w1"},
             "startsAt": (now - timedelta(seconds=5)).isoformat(),
             "endsAt": (ends or now + timedelta(minutes=5)).isoformat()}
    req = urllib.request.Request(f"{base}/api/v2/alerts", data=json.dumps([alert]).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5):
        pass


def test_a_critical_alert_resolved_seconds_after_it_fired_still_pages(tmp_path: Path) -> None:
    rx = Receiver()
    with alertmanager(tmp_path, rx.port) as base:
        # firing, as Prometheus sends it, then resolved 2 s later (the worker was killed)
        _post(base, "CorevoLoopFrozen", "critical")
        _post(base, "CorevoLoopLagHigh", "warning")
        time.sleep(2)
        now = datetime.now(UTC)
        _post(base, "CorevoLoopFrozen", "critical", ends=now)
        _post(base, "CorevoLoopLagHigh", "warning", ends=now)
        deadline = time.monotonic() + 10
        while ("/pager", "firing", "CorevoLoopFrozen") not in rx.got \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)
    rx.server.shutdown()
    assert ("/pager", "firing", "CorevoLoopFrozen") in rx.got, rx.got
    # the warning route waits 30 s: a warning gone by then is not worth a message
    assert not [g for g in rx.got if g[2] == "CorevoLoopLagHigh"], rx.got
