"""One set of shutdown verbs: ``close()`` + ``with`` for sync classes, ``aclose()`` +
``async with`` for async ones, on every public class that has something to stop; the
development tree's verbs (``stop()``, a coroutine ``close()``), kept by 0.2 as aliases
that warned, are gone.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from tests.test_api_reference import PUBLIC

VERBS = ("stop", "close", "aclose", "shutdown")
#: public classes outside the namespaces of PUBLIC that have a shutdown verb
EXTRA = ("corevo_obs.integrations.pyspy.NativeStallCapture",)
#: none left: StallWatchdog is both (close() joins its thread, aclose() awaits it)
PENDING: set[str] = set()
#: public classes that are another framework's type, whose stop verb that framework calls
FRAMEWORK_VERB = {
    "corevo_obs.otel.export.CountedExporter":
        "an OTel SDK MetricExporter: its reader calls shutdown()",
    "corevo_obs.otel.prometheus_reader.ExemplarPrometheusReader":
        "an OTel SDK MetricReader: its MeterProvider calls shutdown()",
}


def _public_classes() -> dict[str, type]:
    found: dict[str, type] = {}
    for module in PUBLIC:
        mod = importlib.import_module(module)
        for name in getattr(mod, "__all__", ()):
            value = getattr(mod, name)
            if inspect.isclass(value) and not issubclass(value, BaseException):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    for path in EXTRA:
        module, name = path.rsplit(".", 1)
        found[path] = getattr(importlib.import_module(module), name)
    return found


def test_every_public_class_with_a_stop_verb_has_the_uniform_ones() -> None:
    checked, wrong = [], []
    for path, cls in _public_classes().items():
        verbs = [v for v in VERBS if callable(getattr(cls, v, None))]
        if not verbs or cls.__name__ in PENDING or path in FRAMEWORK_VERB:
            continue
        checked.append(cls.__name__)
        aclose = getattr(cls, "aclose", None)
        if aclose is not None and inspect.iscoroutinefunction(aclose):
            if not callable(getattr(cls, "__aenter__", None)):
                wrong.append(f"{path}: aclose() but no async with")
            dual = (callable(getattr(cls, "__enter__", None))  # sync and async (a transport)
                    and not inspect.iscoroutinefunction(getattr(cls, "close", None)))
            extra = [v for v in verbs if v != "aclose" and not (dual and v == "close")]
        else:
            close = getattr(cls, "close", None)
            if close is None or inspect.iscoroutinefunction(close):
                wrong.append(f"{path}: no sync close() (has {verbs})")
            elif not callable(getattr(cls, "__enter__", None)):
                wrong.append(f"{path}: close() but no with")
            extra = [v for v in verbs if v != "close"]
        if extra:
            wrong.append(f"{path}: other stop verbs (0.2's aliases are gone): {extra}")
    assert {"MetricsServer", "LoopHealth", "OffloadAdapter", "AsyncLeaseStore",
            "CancelBus", "NativeStallCapture"} <= set(checked), checked
    assert not wrong, "\n".join(wrong)


def test_metrics_server_closes_and_has_no_stop() -> None:
    from corevo_obs import MetricsServer

    with MetricsServer(port=0, registry=CollectorRegistry()) as server:
        assert server.port > 0
    with pytest.raises(RuntimeError):
        server.port  # noqa: B018 - closed: no port
    assert server._httpd is None
    assert not hasattr(server, "stop")


def test_loop_health_and_sampler_aclose_and_have_no_stop() -> None:
    from corevo_obs.loop import LoopLagSampler, install_loop_health

    async def main() -> tuple[bool, bool]:
        health = install_loop_health(registry=CollectorRegistry(), worker="w0")
        async with health:
            await asyncio.sleep(0.02)
        closed = health.sampler._task is None
        async with LoopLagSampler(interval=0.005, registry=CollectorRegistry()) as sampler:
            running = sampler._task is not None and not sampler._task.done()
        return closed, running

    closed, running = asyncio.run(main())
    assert closed and running
    from corevo_obs.loop import LoopHealth
    assert not hasattr(LoopHealth, "stop") and not hasattr(LoopLagSampler, "stop")


def test_async_lease_store_is_closed_by_async_with(tmp_path: Path) -> None:
    from corevo_obs.leases import AsyncSqliteLeaseStore

    async def main() -> None:
        async with AsyncSqliteLeaseStore("q", tmp_path / "q.db", limit=1,
                                         registry=CollectorRegistry()) as store:
            await store.declare_fresh()
            lease = await store.acquire()
            assert lease is not None
            await lease.release()

    asyncio.run(main())
    assert not hasattr(AsyncSqliteLeaseStore, "close")  # 0.2's coroutine alias is gone


def test_sync_stores_are_context_managers(tmp_path: Path) -> None:
    from corevo_obs.claims import SqliteJobStore
    from corevo_obs.leases import SqliteLeaseStore

    stores: list[Any] = [SqliteJobStore(tmp_path / "jobs.db", registry=CollectorRegistry()),
                         SqliteLeaseStore("q", tmp_path / "l.db", limit=1,
                                          registry=CollectorRegistry())]
    for store in stores:
        with store as entered:
            assert entered is store


def test_janitor_closes_by_with_and_has_no_stop(tmp_path: Path) -> None:
    from corevo_obs.mpdir import Janitor

    with Janitor(tmp_path, interval=0.01).start() as janitor:
        assert janitor._thread is not None and janitor._thread.is_alive()
    assert janitor._thread is None
    assert not hasattr(janitor, "stop")
