"""One lifecycle on every public class (core/lifecycle.py holds the rule), checked on real
instances: what runs something starts once (``start()`` returns the component; a second
start, or a ``with`` / ``async with`` after it, starts nothing more) and the block's end
stops it; ``with`` on a component not started starts it; stopping twice, or stopping
what never started, does nothing. Every public class with ``start`` / ``close`` /
``aclose`` / ``__enter__`` / ``__aenter__`` is in one of the tables below, so a new one
cannot skip the walk. Classes on Redis or PostgreSQL run in the system tier.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import socket
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.test_api_reference import PUBLIC

NAMESPACES = (*PUBLIC, "corevo_obs.mpdir", "corevo_obs.integrations.pyspy")
VERBS = ("start", "close", "aclose", "__enter__", "__aenter__")


def _lifecycle_classes() -> dict[str, type]:
    found: dict[str, type] = {}
    for module in NAMESPACES:
        mod = importlib.import_module(module)
        for name in getattr(mod, "__all__", None) or [n for n in dir(mod) if n[:1].isupper()]:
            value = getattr(mod, name)
            if (inspect.isclass(value) and not issubclass(value, BaseException)
                    and value.__module__.startswith("corevo_obs")
                    and any(callable(getattr(value, v, None)) for v in VERBS)):
                found[value.__name__] = value
    return found


# --- components that run something: probe(obj) is what runs (None when nothing does) ---

def _thread(obj: Any) -> Any:
    thread = obj._thread
    return thread if thread is not None and thread.is_alive() else None


def _task(task: Any) -> Any:
    return task if task is not None and not task.done() else None


def _metrics_server(tmp: Path) -> Any:
    from corevo_obs import MetricsServer
    return MetricsServer(port=0, registry=CollectorRegistry())


def _janitor(tmp: Path) -> Any:
    from corevo_obs.mpdir import Janitor
    return Janitor(tmp, interval=60)


def _watchdog(tmp: Path) -> Any:
    from corevo_obs.loop import StallWatchdog
    return StallWatchdog(threshold=30, check_interval=0.01, registry=CollectorRegistry())


def _sampler(tmp: Path) -> Any:
    from corevo_obs.loop import LoopLagSampler
    return LoopLagSampler(interval=0.005, registry=CollectorRegistry())


def _health(tmp: Path) -> Any:
    from corevo_obs import LoopHealth, LoopHealthConfig
    return LoopHealth(LoopHealthConfig(interval=0.005), registry=CollectorRegistry())


def _inbox(tmp: Path) -> Any:
    from corevo_obs.cancel import CommandInbox, SqliteCancelBus
    from corevo_obs.claims import AsyncSqliteJobStore
    return CommandInbox(SqliteCancelBus(tmp / "bus.db"),
                        AsyncSqliteJobStore(tmp / "jobs.db", registry=CollectorRegistry()))


def _health_probe(health: Any) -> Any:
    running = (_task(health.sampler._task), _thread(health.watchdog))
    return None if running == (None, None) else running


#: name -> (factory, probe, how it is entered: "sync", "async" or both)
SERVICES: dict[str, tuple[Callable[[Path], Any], Callable[[Any], Any], tuple[str, ...]]] = {
    "MetricsServer": (_metrics_server, _thread, ("sync",)),
    "Janitor": (_janitor, _thread, ("sync",)),
    "StallWatchdog": (_watchdog, _thread, ("sync", "async")),
    "LoopLagSampler": (_sampler, lambda s: _task(s._task), ("async",)),
    "LoopHealth": (_health, _health_probe, ("async",)),
    "CommandInbox": (_inbox, lambda i: _task(i._listener), ("async",)),
}


def _running_things() -> tuple[int, int]:
    """Threads and loop tasks alive: a second start must add neither."""
    tasks = 0
    try:
        tasks = len(asyncio.all_tasks())
    except RuntimeError:  # no running loop
        pass
    return threading.active_count(), tasks


async def _maybe(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


async def _stop(obj: Any, way: str) -> None:
    if way == "async":
        await obj.aclose()
    else:
        obj.close()


async def _walk(make: Callable[[], Any], probe: Callable[[Any], Any], way: str) -> None:
    # stop without start, twice: nothing happens, nothing runs
    fresh = make()
    await _stop(fresh, way)
    await _stop(fresh, way)
    assert probe(fresh) is None
    # start twice: the same component, the one thing it runs
    comp = make()
    assert await _maybe(comp.start()) is comp
    running = probe(comp)
    assert running is not None
    counts = _running_things()
    assert await _maybe(comp.start()) is comp
    assert probe(comp) == running and _running_things() == counts, "started twice"
    # a context manager after start: does not restart, stops at the block's end
    if way == "async":
        async with comp as entered:
            assert entered is comp and probe(comp) == running
            assert _running_things() == counts, "the block started it again"
    else:
        with comp as entered:
            assert entered is comp and probe(comp) == running
            assert _running_things() == counts, "the block started it again"
    assert probe(comp) is None, "still running after the block"
    await _stop(comp, way)  # stop twice
    assert probe(comp) is None
    # a context manager on a component not started starts it
    other = make()
    if way == "async":
        async with other as entered:
            assert entered is other and probe(other) is not None
    else:
        with other as entered:
            assert entered is other and probe(other) is not None
    assert probe(other) is None


@pytest.mark.parametrize(("name", "way"), [(n, w) for n, (_, _, ways) in SERVICES.items()
                                           for w in ways])
def test_a_service_starts_once_and_stops_once(tmp_path: Path, name: str, way: str) -> None:
    factory, probe, _ = SERVICES[name]
    counter = iter(range(100))

    def make() -> Any:
        path = tmp_path / str(next(counter))
        path.mkdir()
        return factory(path)

    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the rule uses no alias
        asyncio.run(_walk(make, probe, way))


def test_metrics_server_in_a_block_after_start_serves_on_one_port_then_none() -> None:
    """The 0.2.0 bug: ``with MetricsServer().start()`` opened a second listener, and one
    still listened after the block."""
    from corevo_obs import MetricsServer

    with MetricsServer(port=0, registry=CollectorRegistry()).start() as server:
        port = server.port
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        assert server.start().port == port
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()


def test_async_with_loop_health_samples() -> None:
    """The 0.2.0 bug: ``async with LoopHealth(...)`` never started (0 samples)."""
    from corevo_obs import LoopHealth, LoopHealthConfig

    async def main() -> int:
        async with LoopHealth(LoopHealthConfig(interval=0.005),
                              registry=CollectorRegistry()) as health:
            for _ in range(400):
                if health.sampler.ticks >= 2:
                    break
                await asyncio.sleep(0.005)
        return health.sampler.ticks

    assert asyncio.run(main()) >= 2


# --- components that hold something but run nothing: close() / aclose() and the block ---

def _sqlite_lease(tmp: Path) -> Any:
    from corevo_obs.leases import SqliteLeaseStore
    return SqliteLeaseStore("q", tmp / "l.db", limit=1, registry=CollectorRegistry())


def _async_sqlite_lease(tmp: Path) -> Any:
    from corevo_obs.leases import AsyncSqliteLeaseStore
    return AsyncSqliteLeaseStore("q", tmp / "l.db", limit=1, registry=CollectorRegistry())


def _lease_buffer(tmp: Path) -> Any:
    from corevo_obs.leases import LeaseBuffer
    return LeaseBuffer(_sqlite_lease(tmp), size=1)


def _async_lease_buffer(tmp: Path) -> Any:
    from corevo_obs.leases import AsyncLeaseBuffer
    return AsyncLeaseBuffer(_async_sqlite_lease(tmp), size=1)


def _offload(tmp: Path) -> Any:
    from corevo_obs import OffloadAdapter
    return OffloadAdapter(name="lc", max_in_flight=1, registry=CollectorRegistry())


def _transport(tmp: Path) -> Any:
    import httpx

    from corevo_obs.integrations.http_clients import CorevoTransport
    return CorevoTransport(httpx.MockTransport(lambda request: httpx.Response(204)))


def _native_capture(tmp: Path) -> Any:
    from corevo_obs.integrations.pyspy import NativeStallCapture
    return NativeStallCapture(min_stall=1.0, registry=CollectorRegistry())


def _subscription(tmp: Path) -> Any:
    from corevo_obs.cancel import SqliteCancelBus

    class Subscribed:  # a Subscription comes only from a bus, on the loop
        async def make(self) -> Any:
            return await SqliteCancelBus(tmp / "bus.db").subscribe("owner-1")
    return Subscribed()


def _named(module: str, name: str, *args: str, **kw: Any) -> Callable[[Path], Any]:
    def make(tmp: Path) -> Any:
        cls = getattr(importlib.import_module(module), name)
        return cls(*[tmp / a for a in args], **kw)
    return make


#: name -> factory, on SQLite or in memory (the default tier)
def _otel_metrics(tmp: Path) -> Any:
    from opentelemetry.sdk.metrics import MeterProvider

    from corevo_obs.otel import instrument_metrics
    return instrument_metrics(meter_provider=MeterProvider())


LOCAL: dict[str, Callable[[Path], Any]] = {
    "SqliteLeaseStore": _sqlite_lease,
    "AsyncSqliteLeaseStore": _async_sqlite_lease,
    "LeaseBuffer": _lease_buffer,
    "AsyncLeaseBuffer": _async_lease_buffer,
    "SqliteJobStore": _named("corevo_obs.claims", "SqliteJobStore", "j.db",
                             registry=CollectorRegistry()),
    "AsyncSqliteJobStore": _named("corevo_obs.claims", "AsyncSqliteJobStore", "j.db",
                                  registry=CollectorRegistry()),
    "SqliteDatabase": _named("corevo_obs.claims", "SqliteDatabase", "d.db"),
    "EventHistory": _named("corevo_obs.events", "EventHistory", "e.db"),
    "AsyncEventHistory": _named("corevo_obs.events", "AsyncEventHistory", "e.db"),
    "SqliteCancelBus": _named("corevo_obs.cancel", "SqliteCancelBus", "b.db"),
    "Subscription": _subscription,
    "OffloadAdapter": _offload,
    "CorevoTransport": _transport,
    "NativeStallCapture": _native_capture,
    "OtelMetrics": _otel_metrics,
}


TIMEOUTS: dict[str, Any] = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0}


def _redis_lease(url: str) -> Any:
    import redis

    from corevo_obs.leases import RedisLeaseStore
    return RedisLeaseStore("q", redis.Redis.from_url(url, **TIMEOUTS), limit=1,
                           registry=CollectorRegistry())


def _async_redis_lease(url: str) -> Any:
    import redis.asyncio

    from corevo_obs.leases import AsyncRedisLeaseStore
    return AsyncRedisLeaseStore("q", redis.asyncio.Redis.from_url(url, **TIMEOUTS), limit=1,
                                registry=CollectorRegistry())


def _sharded(url: str) -> Any:
    import redis

    from corevo_obs.leases import ShardedLeaseStore
    return ShardedLeaseStore("q", redis.Redis.from_url(url, **TIMEOUTS), limit=2, shards=2,
                             registry=CollectorRegistry())


def _async_sharded(url: str) -> Any:
    import redis.asyncio

    from corevo_obs.leases import AsyncShardedLeaseStore
    client = redis.asyncio.Redis.from_url(url, **TIMEOUTS)
    return AsyncShardedLeaseStore("q", client, limit=2, shards=2, registry=CollectorRegistry())


def _redis_bus(url: str) -> Any:
    from corevo_obs.cancel import RedisCancelBus
    return RedisCancelBus(url)


#: name -> factory(url), on the test session's redis-server (system tier)
ON_REDIS: dict[str, Callable[[str], Any]] = {
    "RedisLeaseStore": _redis_lease,
    "AsyncRedisLeaseStore": _async_redis_lease,
    "ShardedLeaseStore": _sharded,
    "AsyncShardedLeaseStore": _async_sharded,
    "RedisCancelBus": _redis_bus,
}

#: name -> factory(dsn), on PostgreSQL (system tier)
ON_POSTGRES: dict[str, Callable[[str], Any]] = {
    "PostgresDatabase": lambda dsn: _claims().PostgresDatabase(dsn),
    "PostgresJobStore": lambda dsn: _claims().PostgresJobStore(
        dsn, registry=CollectorRegistry()),
    "AsyncPostgresJobStore": lambda dsn: _claims().AsyncPostgresJobStore(
        dsn, registry=CollectorRegistry()),
}


def _claims() -> Any:
    return importlib.import_module("corevo_obs.claims")


#: bases whose concrete subclasses above are walked
BASES = {"LeaseStore": "SqliteLeaseStore", "AsyncLeaseStore": "AsyncSqliteLeaseStore",
         "JobStore": "SqliteJobStore", "AsyncJobStore": "AsyncSqliteJobStore",
         "Database": "SqliteDatabase", "CancelBus": "SqliteCancelBus"}

#: a ``with`` that is the scope of one hold or one activation, not a component's life:
#: their own tests (test_leases, test_stages) check what the scope does
SCOPES = {
    "Lease": "`with lease:` releases the lease it holds",
    "AsyncLease": "`async with lease:` releases the lease it holds",
    "Hold": "`with store.hold(...)`: acquire at entry, release at exit",
    "AsyncHold": "`async with store.hold(...)`: acquire at entry, release at exit",
    "Activation": "`with tracker.activate():` makes a tracker current for the block",
    "ExternalWait": "`with external(dep):` times one wait on a dependency",
}


def test_every_lifecycle_class_is_walked() -> None:
    found = set(_lifecycle_classes())
    walked = set(SERVICES) | set(LOCAL) | set(ON_REDIS) | set(ON_POSTGRES)
    assert found - walked - set(BASES) - set(SCOPES) == set(), "not walked: add them here"
    assert set(BASES.values()) <= walked
    stale = (walked | set(BASES) | set(SCOPES)) - found
    assert not stale, f"no longer public lifecycle classes: {sorted(stale)}"


async def _closes_once(make: Callable[[], Any]) -> None:
    async def made() -> Any:
        obj = make()
        return await obj.make() if hasattr(obj, "make") else obj

    ways = []
    probe = await made()
    if inspect.iscoroutinefunction(getattr(type(probe), "aclose", None)):
        ways.append("async")
    if callable(getattr(probe, "__enter__", None)) and not inspect.iscoroutinefunction(
            getattr(type(probe), "close", None)):
        ways.append("sync")
    await _stop(probe, ways[0])
    assert ways, f"{type(probe).__name__}: no close() or aclose()"
    for way in ways:
        fresh = await made()  # stop without start (nothing used), twice
        await _stop(fresh, way)
        await _stop(fresh, way)
        obj = await made()
        if way == "async":
            async with obj as entered:
                assert entered is obj
        else:
            with obj as entered:
                assert entered is obj
        await _stop(obj, way)  # stop twice: the block stopped it once


def _check_closes(make: Callable[[], Any]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        asyncio.run(_closes_once(make))


@pytest.mark.parametrize("name", sorted(LOCAL))
def test_a_component_closes_once(tmp_path: Path, name: str) -> None:
    counter = iter(range(100))

    def make() -> Any:
        path = tmp_path / str(next(counter))
        path.mkdir()
        return LOCAL[name](path)

    _check_closes(make)


@pytest.mark.parametrize("name", sorted(ON_REDIS))
def test_a_redis_component_closes_once(redis_url: str, name: str) -> None:
    _check_closes(lambda: ON_REDIS[name](redis_url))


@pytest.mark.parametrize("name", sorted(ON_POSTGRES))
def test_a_postgres_component_closes_once(pg_dsn: str, name: str) -> None:
    _check_closes(lambda: ON_POSTGRES[name](pg_dsn))
