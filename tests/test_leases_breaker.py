"""The circuit breaker on a real backend that goes down for 10 s under load.

A private redis-server sits behind a TCP proxy that counts every connection it accepts.
"Down" means the proxy accepts and at once closes each connection (the client sees a dead
server), so each call that reaches the backend is one counted connection. Twenty asyncio
callers keep acquiring (``wait=0``) and holding for a moment; after five failures in a row
the breaker opens and calls are short-circuited: the test checks that at most one call per
back-off window reached the backend while it was down, that callers got ``BreakerOpen``
at once, and that recovery came by itself after the backend returned, counted in the
transition metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import threading
import time

import pytest
from prometheus_client import CollectorRegistry

from corevo_obs.core.errors import LeaseRejected
from corevo_obs.leases import BreakerOpen, CircuitBreaker

DOWN_FOR, TIMEOUT, FAILURES = 10.0, 2.0, 5
BACKOFF = TIMEOUT / 4


class CountingProxy:
    """Forwards to ``upstream``; while ``down``, accepts and closes (counted)."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self.down = False
        self.refused: list[float] = []  # monotonic times of connections refused while down
        self._links: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            if self.down:
                self.refused.append(time.monotonic())
                conn.close()
                continue
            up = socket.create_connection(("127.0.0.1", self.upstream))
            self._links += [conn, up]
            for a, b in ((conn, up), (up, conn)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Go down: sever every open link, refuse new ones."""
        self.down = True
        for s in self._links:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
        self._links.clear()

    def close(self) -> None:
        self._listener.close()
        self.cut()


def test_breaker_unit_states_with_an_injected_clock(registry: CollectorRegistry) -> None:
    now = [0.0]
    b = CircuitBreaker("lease:x", failures=3, backoff=1.0, worker="w", registry=registry,
                       clock=lambda: now[0])
    assert b.allow() and b.state == "closed"
    for _ in range(2):
        b.failure()
    b.success()                       # a success ends the streak
    for _ in range(2):
        b.failure()
    assert b.state == "closed"
    b.failure()
    assert b.state == "open" and not b.allow() and b.retry_after() == 1.0
    now[0] = 1.0
    assert b.allow() and b.state == "half_open"   # the one probe
    assert not b.allow()                          # a second caller waits for it
    b.failure()
    assert b.state == "open" and not b.allow()
    now[0] = 2.5
    assert b.allow()
    b.success()
    assert b.state == "closed" and b.allow()
    def val(name: str, **kw: str) -> float | None:
        return registry.get_sample_value(name, {"worker": "w", "backend": "lease:x", **kw})
    assert val("corevo_breaker_transitions_total", to="open") == 2
    assert val("corevo_breaker_transitions_total", to="half_open") == 2
    assert val("corevo_breaker_transitions_total", to="closed") == 1
    assert val("corevo_breaker_short_circuited_total") == 3
    assert val("corevo_breaker_state") == 0
    with pytest.raises(Exception, match="failures"):
        CircuitBreaker("x", failures=0)
    with pytest.raises(Exception, match="backoff"):
        CircuitBreaker("x", backoff=float("nan"))


def test_backend_down_10s_under_load_one_call_per_window(
        redis_url: str, registry: CollectorRegistry) -> None:
    from corevo_obs.leases.redis_store import AsyncRedisLeaseStore

    upstream = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    proxy = CountingProxy(upstream)
    rejected_at_once: list[float] = []
    outcomes: dict[str, int] = {}
    grants: list[float] = []

    async def scenario() -> dict[str, float]:
        store = AsyncRedisLeaseStore("brk", f"redis://127.0.0.1:{proxy.port}/0", limit=4,
                                     timeout=TIMEOUT, heartbeat_interval=0.4, margin=0.3,
                                     socket_timeout=0.3, connect_timeout=0.2,
                                     registry=registry)
        assert store.breaker is not None and store.breaker.backoff == BACKOFF
        await store.declare_fresh()
        stop = time.monotonic() + 3.0 + DOWN_FOR + 4.0

        async def caller() -> None:
            while time.monotonic() < stop:
                t = time.monotonic()
                try:
                    async with store.hold():
                        grants.append(time.monotonic())
                        await asyncio.sleep(0.05)
                    outcomes["granted"] = outcomes.get("granted", 0) + 1
                except BreakerOpen:
                    rejected_at_once.append(time.monotonic() - t)
                    outcomes["breaker_open"] = outcomes.get("breaker_open", 0) + 1
                except LeaseRejected as exc:
                    outcomes[exc.outcome] = outcomes.get(exc.outcome, 0) + 1
                await asyncio.sleep(0.01)

        async def fault() -> dict[str, float]:
            await asyncio.sleep(3.0)
            proxy.cut()
            down = time.monotonic()
            await asyncio.sleep(DOWN_FOR)
            proxy.down = False
            return {"down": down, "up": time.monotonic()}

        callers = asyncio.gather(*(caller() for _ in range(20)))
        times = await fault()
        await callers
        await store.aclose()
        return times

    try:
        times = asyncio.run(scenario())
    finally:
        proxy.close()
    down, up = times["down"], times["up"]
    reached = [t for t in proxy.refused if down <= t <= up]
    windows = math.ceil(DOWN_FOR / BACKOFF)
    after = [g for g in grants if g > up]
    worker = next(iter({s.labels["worker"] for m in registry.collect() for s in m.samples
                        if s.name == "corevo_breaker_state"}))

    def val(name: str, **kw: str) -> float:
        return registry.get_sample_value(name, {"worker": worker, "backend": "lease:brk",
                                                **kw}) or 0.0
    worst = max(rejected_at_once)
    print(f"\nbackend down {DOWN_FOR:.0f}s: {len(reached)} calls reached it "
          f"({windows} back-off windows of {BACKOFF}s, {FAILURES} failures to open), "
          f"{len(rejected_at_once)} BreakerOpen rejections, slowest {worst * 1000:.2f} ms; "
          f"short-circuited {val('corevo_breaker_short_circuited_total'):.0f}; transitions "
          f"open {val('corevo_breaker_transitions_total', to='open'):.0f} half_open "
          f"{val('corevo_breaker_transitions_total', to='half_open'):.0f} closed "
          f"{val('corevo_breaker_transitions_total', to='closed'):.0f}; first grant "
          f"{(min(after) - up) if after else float('nan'):.2f}s after the backend came back; "
          f"outcomes {outcomes}")
    # the calls that opened it (every caller in flight when it went down may fail once),
    # then at most one probe per back-off window
    assert len(reached) <= 20 + windows + 1, reached
    probes = [t for t in reached if t > down + 0.5]
    assert len(probes) <= windows + 1
    per_window: dict[int, int] = {}
    for t in probes:
        per_window[int((t - down) / BACKOFF)] = per_window.get(int((t - down) / BACKOFF), 0) + 1
    assert max(per_window.values(), default=0) <= 2  # window edges: one probe each side
    assert len(rejected_at_once) > 100 and worst < 0.05
    assert val("corevo_breaker_transitions_total", to="open") >= 2  # probes kept failing
    assert val("corevo_breaker_transitions_total", to="closed") >= 1
    assert val("corevo_breaker_state") == 0  # recovered by itself
    assert after and min(after) - up < BACKOFF + 1.0


def test_breaker_open_says_how_long_the_acquire_waited_and_when_the_next_probe_goes() -> None:
    """An acquire that waited 2 s before giving up must not say "within 0.0s"."""
    from corevo_obs.leases.breaker import open_pause

    started = time.monotonic() - 2.0
    try:
        open_pause("q", 1.5, started, wait=2.5)
    except BreakerOpen as exc:
        assert 2.0 <= exc.waited < 2.5 and exc.retry_after == 1.5
        assert str(exc) == (f"no lease on q within {exc.waited:.1f}s (last: unavailable): "
                            "the backend is known down, next probe in 1.5s")
    else:
        raise AssertionError("no BreakerOpen")
    assert open_pause("q", 0.2, time.monotonic(), wait=5.0) == 0.2  # room: wait, then retry
