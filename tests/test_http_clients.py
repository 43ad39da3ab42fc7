"""CorevoTransport is a real httpx transport: clients open, use and close it as their own.

Against a real loopback HTTP server (and a closed port for the failure case); the
external-stage histogram is read from a private registry.
"""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest
from prometheus_client import CollectorRegistry

from corevo_obs.demo.slow_upstream import SlowUpstream
from corevo_obs.integrations.http_clients import CorevoTransport
from corevo_obs.stages import StageRecorder

LATENCY = 0.05


class CountingTransport(httpx.AsyncHTTPTransport):
    """The real transport, counting how the client opened and closed it."""

    entered = exited = 0

    async def __aenter__(self) -> CountingTransport:
        self.entered += 1
        await super().__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.exited += 1
        await super().__aexit__(*exc)  # type: ignore[arg-type]


def _external(registry: CollectorRegistry, suffix: str) -> float:
    labels = {"worker": "w0", "kind": "job", "dependency": "store"}
    return registry.get_sample_value(f"corevo_task_external_seconds_{suffix}", labels) or 0.0


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_it_is_an_httpx_transport() -> None:
    transport = CorevoTransport(httpx.AsyncHTTPTransport())
    assert isinstance(transport, httpx.AsyncBaseTransport)
    assert isinstance(CorevoTransport(httpx.HTTPTransport()), httpx.BaseTransport)


def test_async_client_opens_uses_and_closes_it() -> None:
    registry = CollectorRegistry()
    rec = StageRecorder(worker="w0", registry=registry, kinds={"job"})
    inner = CountingTransport()

    async def main() -> tuple[int, type[BaseException] | None]:
        with SlowUpstream(LATENCY) as up:
            transport = CorevoTransport(inner, dependency="store")
            async with httpx.AsyncClient(transport=transport) as client:
                assert inner.entered == 1
                with rec.task("job").activate():
                    response = await client.get(up.url)
                    failed: type[BaseException] | None = None
                    try:
                        await client.get(f"http://127.0.0.1:{_closed_port()}/")
                    except httpx.ConnectError as exc:
                        failed = type(exc)
            return response.status_code, failed

    status, failed = asyncio.run(main())
    assert status == 200 and failed is httpx.ConnectError
    assert inner.exited == 1
    assert _external(registry, "count") == 2  # the refused call is recorded too
    assert _external(registry, "sum") >= LATENCY


def test_sync_client_uses_it_too() -> None:
    registry = CollectorRegistry()
    rec = StageRecorder(worker="w0", registry=registry, kinds={"job"})
    with SlowUpstream(LATENCY) as up, httpx.Client(
            transport=CorevoTransport(httpx.HTTPTransport(), dependency="store")) as client:
        with rec.task("job").activate():
            assert client.get(up.url).status_code == 200
        assert client.get(up.url).status_code == 200  # outside a task: not recorded
    assert _external(registry, "count") == 1
    assert _external(registry, "sum") >= LATENCY


def test_a_mismatched_client_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="use httpx.AsyncClient"), httpx.Client(
            transport=CorevoTransport(httpx.AsyncHTTPTransport())) as client:  # type: ignore[arg-type]
        client.get("http://127.0.0.1:1/")
