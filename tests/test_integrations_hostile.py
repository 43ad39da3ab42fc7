"""The web integrations against a hostile environment and hostile clients, on real servers
(uvicorn, aiohttp.web): the instrumentation degrades, the host serves every request.

- a bad ``$COREVO_WORKER``: requests are answered (not 500, not a failed start), the
  error is counted once and logged once;
- made-up methods and 405s are one kind, so a real route keeps its own kind;
- aiohttp ``FileResponse`` / ``add_static`` with the middleware: no error, keep-alive kept;
- a client gone mid-stream is ``cancelled`` on both frameworks.
"""

from __future__ import annotations

import http.client
import socket
from pathlib import Path

import pytest

from tests.apps import app_env, eventually, get, python, samples, serve, value
from tests.conftest import HELPERS, free_port

FRAMEWORKS = ("asgi", "aiohttp")
ITEMS = "GET /items/{item_id}"


def _server(tmp_path: Path, framework: str, **env: str) -> tuple[list[str], int, Path]:
    port = free_port()
    static = tmp_path / "static"
    static.mkdir(exist_ok=True)
    (static / "page.txt").write_text("page body\n" * 100)
    cmd = python(str(HELPERS / "web_app.py"), framework, "--port", str(port),
                 "--static", str(static))
    return cmd, port, tmp_path / f"{framework}.log"


@pytest.fixture(params=FRAMEWORKS)
def framework(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _metrics(port: int) -> dict:
    return samples(get(f"http://127.0.0.1:{port}/metrics").decode())


def _request(conn: http.client.HTTPConnection, method: str, path: str) -> tuple[int, bytes]:
    conn.request(method, path)
    reply = conn.getresponse()
    return reply.status, reply.read()


def test_bad_worker_env_degrades_never_fails_a_request(tmp_path: Path, framework: str) -> None:
    cmd, port, log = _server(tmp_path, framework)
    with serve(cmd, port, app_env(COREVO_WORKER="worker/1"), log):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        statuses = [_request(conn, "GET", f"/items/{i}")[0] for i in range(5)]
        conn.close()
        assert statuses == [200] * 5, "the instrumentation's environment failed the host"
        found = _metrics(port)
    assert value(found, "corevo_task_total_seconds_count", kind=ITEMS, outcome="completed") == 5
    assert value(found, "corevo_instrumentation_errors_total", component="stages") == 1
    said = log.read_text(errors="replace")
    assert said.count("'worker/1'") == 1, said  # logged once, not once per request


def test_made_up_methods_do_not_take_the_kinds(tmp_path: Path, framework: str) -> None:
    cmd, port, log = _server(tmp_path, framework)
    path = "/items/1" if framework == "asgi" else "/any"  # aiohttp: a route taking any method
    # aiohttp's C parser answers 400 to methods llhttp does not know; its pure-Python
    # parser (PyPy, AIOHTTP_NO_EXTENSIONS) hands any token to the app
    env = app_env(COREVO_WORKER="w0", AIOHTTP_NO_EXTENSIONS="1")
    with serve(cmd, port, env, log):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        for i in range(130):
            _request(conn, f"X{i}", path)
        for _ in range(20):
            assert _request(conn, "DELETE", "/items/1")[0] == 405
        assert _request(conn, "GET", "/items/2")[0] == 200
        conn.close()
        found = _metrics(port)
    kinds = {dict(ls).get("kind") for (n, ls) in found if n == "corevo_task_total_seconds_count"}
    assert not any(k and k.startswith("X") for k in kinds), kinds
    assert value(found, "corevo_task_total_seconds_count", kind=ITEMS) == 1
    assert value(found, "corevo_task_total_seconds_count", kind="other") == 0
    assert value(found, "corevo_task_total_seconds_count", kind="unmatched") == 150


def test_aiohttp_file_responses_keep_the_connection(tmp_path: Path) -> None:
    cmd, port, log = _server(tmp_path, "aiohttp")
    body = (tmp_path / "static" / "page.txt").read_bytes()
    with serve(cmd, port, app_env(COREVO_WORKER="w0"), log):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        ports = set()
        for i in range(10):
            status, got = _request(conn, "GET", "/file" if i % 2 else "/static/page.txt")
            assert (status, got) == (200, body)
            assert conn.sock is not None, "the server closed the keep-alive connection"
            ports.add(conn.sock.getsockname()[1])
        conn.close()
        found = _metrics(port)
    said = log.read_text(errors="replace")
    assert "Error handling request" not in said and "Traceback" not in said, said
    assert len(ports) == 1, f"{len(ports)} connections for 10 keep-alive requests"
    done = value(found, "corevo_task_total_seconds_count", outcome="completed")
    assert value(found, "corevo_task_total_seconds_count", kind="GET /file",
                 outcome="completed") == 5
    assert done == 10, "every file request recorded once, as completed"
    assert value(found, "corevo_task_first_event_seconds_count") == 10


def test_client_gone_mid_stream_is_cancelled(tmp_path: Path, framework: str) -> None:
    cmd, port, log = _server(tmp_path, framework)
    with serve(cmd, port, app_env(COREVO_WORKER="w0"), log):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            seen = b""
            while b"chunk 1" not in seen:
                seen += sock.recv(4096)
        outcomes = eventually("the stream's outcome", lambda: {
            o: value(_metrics(port), "corevo_task_total_seconds_count", kind="GET /stream",
                     outcome=o) for o in ("cancelled", "failed", "completed")
        } if value(_metrics(port), "corevo_task_total_seconds_count", kind="GET /stream")
            else None, timeout=20)
    assert outcomes == {"cancelled": 1, "failed": 0, "completed": 0}

