"""The fixed-latency upstream: the app's outgoing calls land here during a run.

It removes the real dependency's variance, as the design's validation workload asks: every
call waits the same ``latency`` and gets the same body, so anything that moves in the
app's numbers moved because of the app. ``/stream`` (and anything under it) is the
streaming variant: the latency, then ``chunks`` fixed chunks ``interval`` apart.
``/_corevo/stats`` counts what was served.

It runs in its own process (``python -m corevo_obs.loadtest.upstream``), so its work
never shares a GIL with the load driver's clocks, and binds loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import selectors
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .loopback import urlopen
from .workload import UpstreamSpec

STATS_PATH = "/_corevo/stats"


@dataclass
class Upstream:
    """A running upstream subprocess; ``url`` is the fixed variant, ``stream_url`` the other."""

    proc: subprocess.Popen[bytes]
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def stream_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/stream"

    def stats(self) -> dict[str, int]:
        try:
            with urlopen(self.url.rstrip("/") + STATS_PATH, timeout=5) as r:
                return {k: int(v) for k, v in json.loads(r.read()).items()}
        except (OSError, ValueError):
            return {}

    def close(self) -> None:
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_upstream(spec: UpstreamSpec, log: Path, timeout: float = 20.0) -> Upstream:
    """Start the upstream process and wait until it says which port it bound.

    Its stderr goes to ``log`` (a pipe nobody reads would fill and block it)."""
    cmd = [sys.executable, "-m", "corevo_obs.loadtest.upstream",
           "--latency", repr(spec.latency_seconds), "--body-bytes", str(spec.body_bytes),
           "--chunks", str(spec.stream_chunks), "--interval", repr(spec.chunk_interval_seconds),
           "--port", str(spec.port)]
    with open(log, "ab") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err)
    assert proc.stdout is not None
    line = b""
    with selectors.DefaultSelector() as sel:  # the child prints its port once it listens
        sel.register(proc.stdout, selectors.EVENT_READ)
        if sel.select(timeout):
            line = proc.stdout.readline()
    if not line.strip().isdigit():
        proc.kill()
        proc.wait()
        said = log.read_text(errors="replace").strip().splitlines()
        from .workload import WorkloadError

        raise WorkloadError(f"the upstream did not start ({said[-1] if said else 'no output'})",
                            source="upstream")
    return Upstream(proc, int(line))


def _app(latency: float, body: bytes, chunks: int, interval: float) -> Any:
    from aiohttp import web

    counts = {"requests": 0, "streams": 0, "completed": 0, "disconnected": 0}

    async def fixed(request: web.Request) -> web.StreamResponse:
        if request.path == STATS_PATH:
            return web.json_response(counts)
        streaming = request.path == "/stream" or request.path.startswith("/stream/")
        counts["streams" if streaming else "requests"] += 1
        try:
            await request.read()
            await asyncio.sleep(latency)
            if not streaming:
                reply = web.Response(body=body, content_type="text/plain")
                counts["completed"] += 1
                return reply
            resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
            await resp.prepare(request)
            for i in range(chunks):
                if i:
                    await asyncio.sleep(interval)
                await resp.write(body + b"\n")
            await resp.write_eof()
            counts["completed"] += 1
            return resp
        except (asyncio.CancelledError, ConnectionError):
            counts["disconnected"] += 1
            raise

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fixed)
    return app


async def _serve(args: argparse.Namespace) -> None:
    from aiohttp import web

    body = (b"x" * args.body_bytes) or b""
    runner = web.AppRunner(_app(args.latency, body, args.chunks, args.interval),
                           access_log=None, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port)
    await site.start()
    port = runner.addresses[0][1]
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    parent = os.getppid()
    while not stop.is_set():  # never outlive the tool that started us
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except TimeoutError:
            if os.getppid() != parent:
                break
    await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="corevo_obs.loadtest.upstream")
    p.add_argument("--latency", type=float, default=0.05)
    p.add_argument("--body-bytes", type=int, default=64)
    p.add_argument("--chunks", type=int, default=3)
    p.add_argument("--interval", type=float, default=0.02)
    p.add_argument("--port", type=int, default=0)
    try:
        asyncio.run(_serve(p.parse_args(argv)))
    except OSError as exc:
        print(f"upstream: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
