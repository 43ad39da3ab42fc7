"""The real aiomonitor in a real worker, driven over its telnet interface."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import subprocess
import threading
import time

import pytest

from corevo_obs import install_loop_health
from corevo_obs.integrations.monitor import (
    MonitorError,
    RecentLag,
    install_monitor,
    offload_snapshot,
    register_inspectable,
    snapshots,
)
from tests.conftest import HELPERS, free_port, helper_cmd

IAC, SB, SE, WILL, DO = 255, 250, 240, 251, 253
TTYPE, NAWS = 24, 31
ANSI = re.compile(rb"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][A-Z0-9]|[=>78])")
SLOW_LINE = next(
    i for i, t in enumerate((HELPERS / "monitor_worker.py").read_text().splitlines(), 1)
    if "# SLOW-HANDLER" in t
)


class TelnetClient:
    """Just enough telnet for prompt_toolkit: answer TTYPE and NAWS, strip the escapes."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.text = b""

    def _feed(self, data: bytes) -> None:
        i = 0
        while i < len(data):
            b = data[i]
            if b != IAC:
                self.text += bytes([b])
                i += 1
                continue
            cmd = data[i + 1] if i + 1 < len(data) else None
            opt = data[i + 2] if i + 2 < len(data) else None
            if cmd == DO and opt == TTYPE:
                self.sock.sendall(bytes([IAC, WILL, TTYPE]))
            elif cmd == DO and opt == NAWS:
                self.sock.sendall(bytes([IAC, WILL, NAWS, IAC, SB, NAWS, 0, 250, 0, 60, IAC, SE]))
            if cmd == SB:
                end = data.find(bytes([IAC, SE]), i)
                if opt == TTYPE:
                    self.sock.sendall(bytes([IAC, SB, TTYPE, 0]) + b"VT100" + bytes([IAC, SE]))
                i = len(data) if end < 0 else end + 2
            else:
                i += 3

    def read_until(self, pattern: str, timeout: float = 10.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            clean = ANSI.sub(b"", self.text).replace(b"\r", b"").decode(errors="replace")
            if re.search(pattern, clean, re.S):
                self.text = b""
                return clean
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {pattern!r} in monitor output:\n{clean}")
            self.sock.settimeout(left)
            try:
                self._feed(self.sock.recv(65536))
            except TimeoutError:
                raise AssertionError(f"no {pattern!r} in monitor output:\n{clean}") from None

    def run(self, command: str, until: str) -> str:
        self.sock.sendall(command.encode() + b"\r")
        return self.read_until(until)

    def close(self) -> None:
        """``exit`` first: the server ends the session instead of writing to a dead socket."""
        try:
            self.sock.sendall(b"exit\r")
            self.sock.settimeout(5)
            while self.sock.recv(65536):
                pass
        except OSError:
            pass
        self.sock.close()


@pytest.fixture
def worker(worker_env, tmp_path):
    port, webui = free_port(), free_port()
    proc = subprocess.Popen(
        helper_cmd("monitor_worker.py", str(port), str(webui), str(tmp_path / "leases.db")),
        env=worker_env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    assert json.loads(proc.stdout.readline()) == {"ready": True}
    client = TelnetClient(port)
    client.read_until(r"corevo\[m0\] >>> ")
    yield proc, client
    client.close()
    if proc.poll() is None:
        proc.stdin.write("quit\n")
        proc.stdin.flush()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_suite_commands_over_telnet(worker):
    proc, client = worker
    helper = str(HELPERS / "monitor_worker.py")
    out = client.run("help", r"offloads.*corevo\[m0\] >>> ")
    for name in ("lag", "stalls", "offloads", "leases"):
        assert re.search(rf"^\s+{name}\s+\S", out, re.M), out

    out = client.run("lag", r"report\(s\)\)")
    m = re.search(r"lag now ([\d.]+)s, max ([\d.]+)s over the last 60s, max ([\d.]+)s since", out)
    assert m, out
    assert 0.25 <= float(m[2]) <= 0.5 and float(m[2]) == float(m[3])
    assert "loop running (stall threshold 0.100s, 1 report(s))" in out

    out = client.run("stalls", r"innermost project frame")
    assert "last 1 of 1 stall(s)" in out
    assert re.search(rf"stalled 0\.[23]\d\ds at {re.escape(helper)}:{SLOW_LINE}:slow_handler", out)
    assert f"{helper}:{SLOW_LINE}:slow_handler <-- innermost project frame" in out

    # a real OffloadAdapter: three thread calls blocked (one operation sunk, one caller
    # gone), two callers queued behind them
    out = client.run("offloads", r"sunk slots \d.*>>> ")
    m = re.search(r"^s3: in flight 3/3 \(oldest ([\d.]+)s\), waiting 2, sunk slots 1, "
                  r"callers gone 2$", out, re.M)
    assert m and 0.3 <= float(m[1]) < 30, out
    out = client.run("leases", r"age [\d.]+s")
    assert "gpu: 1 held by this worker (limit 2)" in out, out
    held = re.search(rf"^  m0@[^:]+:{proc.pid}\.\d+#\d+  age ([\d.]+)s$", out, re.M)
    assert held and 0.3 <= float(held[1]) < 30, out

    # the thread calls return: the queued ones run, every slot but the sunk one comes back
    assert command(proc, "open") == {"opened": True}
    out = client.run("offloads", r"sunk slots \d.*>>> ")
    assert re.search(r"^s3: in flight 0/3, waiting 0, sunk slots 1$", out, re.M), out
    # the lease is given back: the handle leaves the listing at once
    assert command(proc, "release") == {"released": True}
    out = client.run("leases", r"held by this worker.*>>> ")
    assert re.search(r"^gpu: 0 held by this worker \(limit 2\)$", out, re.M), out


def command(proc: subprocess.Popen[str], line: str) -> object:
    """Send a stdin command to the worker and read its one-line JSON answer."""
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def test_lag_answers_while_the_loop_is_frozen(worker):
    proc, client = worker
    assert command(proc, "freeze 6") == {"freezing": True}
    time.sleep(0.4)
    t0 = time.monotonic()
    out = client.run("lag", r"report\(s\)\)")
    assert time.monotonic() - t0 < 2.0  # answered from the monitor's thread, not the loop
    frozen = re.search(r"loop FROZEN NOW for ([\d.]+)s", out)
    assert frozen and float(frozen[1]) >= 0.3, out
    out = client.run("stalls -n 1", r"innermost project frame|no stalls")
    assert "last 1 of 1 stall(s)" in out  # the running freeze is not a report yet
    time.sleep(max(0.0, 1.3 - (time.monotonic() - t0)))  # past ongoing_after (1 s)
    out = client.run("stalls -n 1", r"(?s)in progress now: .*innermost project frame")
    assert re.search(rf"in progress now: \[blocking\] event loop of worker m0 STILL STALLED, "
                     rf"[\d.]+s so far, at .*:{SLOW_LINE}:slow_handler", out), out


def test_non_loopback_host_is_refused_and_busy_port_is_an_error(registry):
    async def main() -> None:
        health = install_loop_health(registry=registry, worker="r0", watchdog=False)
        try:
            with pytest.raises(MonitorError, match="refusing to bind the monitor to '0.0.0.0'"):
                install_monitor(health, host="0.0.0.0", port=free_port())
            with socket.socket() as busy:
                busy.bind(("127.0.0.1", 0))
                busy.listen()
                taken = busy.getsockname()[1]
                with pytest.raises(MonitorError, match=f"cannot bind 127.0.0.1:{taken} \\(port\\)"):
                    install_monitor(health, port=taken, webui_port=free_port())
        finally:
            await health.aclose()

    asyncio.run(main())


def test_registry_isolates_a_failing_provider_and_unregisters():
    def broken() -> dict:
        raise RuntimeError("backend down")

    class Adapter:  # the public state of an OffloadAdapter
        in_flight, max_in_flight, waiting, sunk, closed = 1, 2, 0, 0, False

    off = register_inspectable("offload", "zz-broken", broken)
    off2 = register_inspectable("offload", "zz-ok", offload_snapshot(Adapter()))
    try:
        got = dict(snapshots("offload"))
        assert isinstance(got["zz-broken"], RuntimeError)
        assert got["zz-ok"] == {"in_flight": 1, "limit": 2, "waiting": 0, "sunk": 0,
                                "closed": False}
    finally:
        off()
        off2()
    assert not [n for n, _ in snapshots("offload") if n.startswith("zz-")]
    with pytest.raises(MonitorError.__mro__[1], match="kind must be one of"):
        register_inspectable("queue", "x", broken)


def test_recent_lag_forgets_old_seconds():
    recent = RecentLag(window=5)
    recent(100.2, 0.5)
    recent(100.7, 0.1)
    recent(103.0, 0.2)
    assert recent.max(103.5) == 0.5
    assert recent.max(106.0) == 0.2
    assert recent.max(200.0) == 0.0


def test_offloads_show_a_real_adapter_in_flight_and_waiting(registry):
    from corevo_obs.integrations.monitor import _fmt_providers, _offload_lines, track_offload
    from corevo_obs.offload import OffloadAdapter

    async def main() -> tuple[str, str]:
        adapter = OffloadAdapter(name="s3", max_in_flight=2, registry=registry)
        unregister = track_offload(adapter)
        gate = threading.Event()
        calls = [asyncio.create_task(adapter.run(gate.wait, 30)) for _ in range(3)]
        async with asyncio.timeout(10):
            while adapter.in_flight < 2 or adapter.waiting < 1:  # noqa: ASYNC110 - its state
                await asyncio.sleep(0.01)
        calls[0].cancel()  # its thread call runs on: still in flight, its caller gone
        await asyncio.sleep(0.05)
        text = _fmt_providers("offload", _offload_lines)
        gate.set()
        assert await asyncio.gather(*calls[1:]) == [True] * 2
        await adapter.aclose()
        closed = _fmt_providers("offload", _offload_lines)
        unregister()
        return text, closed

    text, closed = asyncio.run(main())
    assert re.fullmatch(
        r"s3: in flight 2/2 \(oldest \d+\.\ds\), waiting 1, sunk slots 0, callers gone 1", text
    ), text
    assert closed == "s3: in flight 0/2, waiting 0, sunk slots 0, closed"


def test_leases_list_what_this_process_holds_from_a_real_store(tmp_path, registry):
    import gc

    from corevo_obs.integrations.monitor import _fmt_providers, _lease_lines, track_leases
    from corevo_obs.leases import SqliteLeaseStore

    store = SqliteLeaseStore("llm", tmp_path / "l.db", limit=3, worker="w3", registry=registry)
    unregister = track_leases(store)
    try:
        first, second, third = store.acquire(), store.acquire(), store.acquire()
        assert first and second and third and store.acquire() is None
        assert second.release() and not second.release()  # the noop release stays a noop
        del third
        gc.collect()  # a dropped handle is forgotten (its row is reaped by the store later)
        text = _fmt_providers("lease", _lease_lines)
        assert text.splitlines()[0] == "llm: 1 held by this worker (limit 3)", text
        assert re.fullmatch(rf"  {re.escape(first.holder)}  age 0\.\ds", text.splitlines()[1])
    finally:
        unregister()
        store.close()
