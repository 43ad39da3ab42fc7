"""Who reports: every public component takes keyword-only ``worker=`` and ``registry=``
(resolved once into the internal ``Telemetry``) and shares them with the parts it builds."""

from __future__ import annotations

import asyncio
import dataclasses
import os

import pytest
from prometheus_client import REGISTRY

from corevo_obs.core import guard
from corevo_obs.core.errors import ConfigError
from corevo_obs.core.telemetry import Telemetry
from corevo_obs.loop import LoopLagSampler


def test_explicit_keywords_win_over_the_environment(monkeypatch, registry):
    monkeypatch.setenv("COREVO_WORKER", "from-env")
    telemetry = Telemetry.resolve(worker="w3", registry=registry)
    assert (telemetry.worker, telemetry.registry) == ("w3", registry)


def test_environment_then_pid_then_global_registry(monkeypatch):
    monkeypatch.setenv("COREVO_WORKER", "from-env")
    assert Telemetry.resolve() == Telemetry("from-env", REGISTRY)
    monkeypatch.delenv("COREVO_WORKER")
    assert Telemetry.resolve().worker == f"pid{os.getpid()}"


def test_a_bad_environment_on_a_task_path_is_absorbed_not_raised(monkeypatch, registry):
    """``@track_task`` builds its recorder on the first call: a bad ``$COREVO_WORKER``
    must not fail the host's task (counted, label ``pid<N>``); a bad argument still raises."""
    from corevo_obs.stages import track_task

    monkeypatch.setenv("COREVO_WORKER", "worker/1")
    with pytest.raises(ConfigError, match="COREVO_WORKER"):
        Telemetry.resolve(registry=registry)  # start-up paths (install_loop_health) raise

    @track_task("job", registry=registry)
    async def job() -> int:
        return 7

    assert [asyncio.run(job()) for _ in range(3)] == [7, 7, 7]
    pid = f"pid{os.getpid()}"
    assert registry.get_sample_value("corevo_task_total_seconds_count", {
        "worker": pid, "kind": "job", "outcome": "completed"}) == 3
    assert registry.get_sample_value("corevo_instrumentation_errors_total", {
        "worker": pid, "component": "stages"}) == 1
    with pytest.raises(ConfigError, match="worker argument"):
        Telemetry.resolve_on_use("stages", worker="worker/1", registry=registry)


def test_a_bad_worker_name_is_refused_however_the_telemetry_is_built(registry):
    with pytest.raises(ConfigError, match="1-64 characters"):
        Telemetry("not a label!", registry)
    with pytest.raises(ConfigError, match="worker argument"):
        Telemetry.resolve(worker="", registry=registry)


def test_a_telemetry_is_immutable(registry):
    with pytest.raises(dataclasses.FrozenInstanceError):
        Telemetry("w0", registry).worker = "w1"  # type: ignore[misc]


def test_absorb_counts_in_the_telemetry(registry):
    guard.absorb("telemetry-test", RuntimeError("boom"), telemetry=Telemetry("w7", registry))
    assert registry.get_sample_value(
        "corevo_instrumentation_errors_total", {"worker": "w7", "component": "telemetry-test"}
    ) == 1.0
    # the old keywords still work (leases call absorb with them)
    guard.absorb("telemetry-test", RuntimeError("boom"), worker="w7", registry=registry)
    assert registry.get_sample_value(
        "corevo_instrumentation_errors_total", {"worker": "w7", "component": "telemetry-test"}
    ) == 2.0


def test_components_keep_worker_and_registry_keywords(registry):
    sampler = LoopLagSampler(worker="w2", registry=registry)
    assert (sampler.worker, sampler.registry) == ("w2", registry)
    assert not hasattr(sampler, "telemetry")  # the internal Telemetry is not shown


def test_every_component_shows_worker_and_registry_read_only(tmp_path, registry):
    """What replaced ``.telemetry``: each component built with ``worker=`` / ``registry=``
    reads them back as ``.worker`` / ``.registry``, cannot be re-pointed, and shows no
    ``telemetry`` attribute."""
    from corevo_obs import LoopHealth, MetricsObserver, OffloadAdapter, StageRecorder
    from corevo_obs.claims import SqliteJobStore
    from corevo_obs.events import Projector
    from corevo_obs.integrations.asgi import StagesMiddleware
    from corevo_obs.leases import CircuitBreaker, LeaseBuffer, SqliteLeaseStore
    from corevo_obs.loop import LoopHealthConfig, StallWatchdog

    async def app(_s, _r, _send) -> None:
        return None

    who = {"worker": "w9", "registry": registry}
    leases = SqliteLeaseStore("q9", tmp_path / "l.db", limit=2, timeout=10.0,
                              breaker=CircuitBreaker("lease:q9"), **who)
    jobs = SqliteJobStore(tmp_path / "j.db", **who)
    components = [
        LoopLagSampler(**who), StallWatchdog(threshold=0.5, **who),
        LoopHealth(LoopHealthConfig.resolve(), **who), StageRecorder(**who),
        OffloadAdapter(name="sdk", max_in_flight=1, **who), MetricsObserver(**who),
        leases, leases.breaker, LeaseBuffer(leases, size=1, idle=1.0), jobs,
        Projector(lambda _e: None, **who), StagesMiddleware(app, **who),
        CircuitBreaker("lease:other", **who),
    ]
    try:
        for component in components:
            name = type(component).__name__
            assert (component.worker, component.registry) == ("w9", registry), name
            assert not hasattr(component, "telemetry"), name
            for attribute in ("worker", "registry"):
                with pytest.raises(AttributeError):
                    setattr(component, attribute, "other")
    finally:
        leases.close()
        jobs.close()


def test_a_projector_reports_as_the_observer_it_is_given(registry):
    from corevo_obs.events import Event, Projector
    from corevo_obs.observer import MetricsObserver

    projector = Projector(lambda _e: None,
                          observer=MetricsObserver(worker="obs1", registry=registry))
    assert (projector.worker, projector.registry) == ("obs1", registry)
    assert projector.offer(Event("j", "x", 1, 1, "k")) == "applied"
    assert registry.get_sample_value("corevo_events_projected_total",
                                     {"worker": "obs1", "outcome": "applied"}) == 1.0


def test_a_breaker_given_only_a_registry_takes_the_default_worker(monkeypatch, registry):
    """As every other component: ``$COREVO_WORKER`` (not a made-up ``unknown``), checked at
    construction; unbound (neither given) it writes nothing until a store binds it."""
    from corevo_obs.leases import CircuitBreaker

    monkeypatch.setenv("COREVO_WORKER", "env-worker")
    breaker = CircuitBreaker("lease:b", registry=registry)
    assert (breaker.worker, breaker.registry) == ("env-worker", registry)
    assert registry.get_sample_value("corevo_breaker_state", {
        "worker": "env-worker", "backend": "lease:b"}) == 0.0
    with pytest.raises(ConfigError, match="worker argument"):
        CircuitBreaker("lease:b", worker="not a label!", registry=registry)
    assert CircuitBreaker("lease:c").worker == "unknown"


def test_loop_health_gives_its_sampler_and_watchdog_one_label_and_registry(
    monkeypatch, registry
):
    from corevo_obs import install_loop_health

    monkeypatch.setenv("COREVO_WORKER", "not-this-one")

    async def main() -> None:
        async with install_loop_health(worker="shared", registry=registry,
                                       interval=0.01) as health:
            await asyncio.sleep(0.05)
        assert (health.worker, health.registry) == ("shared", registry)
        assert health.watchdog is not None
        for part in (health.sampler, health.watchdog):
            assert (part.worker, part.registry) == ("shared", registry)

    asyncio.run(main())
    assert registry.get_sample_value(
        "corevo_event_loop_lag_seconds_count", {"worker": "shared"}
    ) >= 1
    assert registry.get_sample_value(
        "corevo_event_loop_stalls_total", {"worker": "shared"}
    ) == 0.0
    assert REGISTRY.get_sample_value(
        "corevo_event_loop_lag_seconds_count", {"worker": "shared"}
    ) is None


def test_stages_recorder_middleware_and_decorator_take_the_same_keywords(registry):
    from corevo_obs.integrations.asgi import StagesMiddleware
    from corevo_obs.stages import StageRecorder, shared_recorder, track_task

    rec = StageRecorder(worker="web0", registry=registry)
    assert (rec.worker, rec.registry) == ("web0", registry)
    assert (shared_recorder(worker="web0", registry=registry)
            is shared_recorder(worker="web0", registry=registry))

    async def app(_s, _r, _send) -> None:
        return None

    middleware = StagesMiddleware(app, worker="web0", registry=registry)
    assert (middleware.recorder.worker, middleware.recorder.registry) == ("web0", registry)
    with pytest.raises(ConfigError, match="worker argument"):  # at start, not per request
        StagesMiddleware(app, worker="web/1", registry=registry)

    @track_task("job", worker="web0", registry=registry)
    async def job() -> None:
        return None

    rec.task("chat").finish("completed")
    asyncio.run(job())
    for kind in ("chat", "job"):
        assert registry.get_sample_value(
            "corevo_task_total_seconds_count",
            {"worker": "web0", "kind": kind, "outcome": "completed"}) == 1.0


def test_offload_observer_and_sampler_report_under_the_worker_and_registry_given(
    monkeypatch, registry
):
    from corevo_obs.observer import MetricsObserver
    from corevo_obs.offload import OffloadAdapter

    monkeypatch.setenv("COREVO_WORKER", "not-this-one")
    who = {"worker": "host1", "registry": registry}
    adapter = OffloadAdapter(name="sdk", max_in_flight=2, **who)
    observer = MetricsObserver(**who)
    sampler = LoopLagSampler(**who)
    assert adapter.worker == observer.worker == sampler.worker == "host1"
    assert observer.registry is registry

    async def main() -> int:
        try:
            return await adapter.run(lambda: 41 + 1)
        finally:
            await adapter.aclose()

    assert asyncio.run(main()) == 42
    observer.claim("won")
    observer.lease_acquired("q", "granted", reaped=0, held=1, seconds=0.01)
    assert registry.get_sample_value("corevo_offload_limit",
                                     {"worker": "host1", "adapter": "sdk"}) == 2.0
    assert registry.get_sample_value("corevo_claim_total",
                                     {"worker": "host1", "outcome": "won"}) == 1.0
    assert registry.get_sample_value("corevo_lease_acquire_total",
                                     {"worker": "host1", "quota": "q",
                                      "outcome": "granted"}) == 1.0
    assert REGISTRY.get_sample_value("corevo_offload_limit",
                                     {"worker": "host1", "adapter": "sdk"}) is None


def test_job_store_and_projector_take_the_same_keywords(tmp_path, registry):
    from corevo_obs.claims import SqliteJobStore
    from corevo_obs.events import Event, Projector

    jobs = SqliteJobStore(tmp_path / "jobs.db", worker="jobs0", registry=registry)
    projector = Projector(lambda _e: None, worker="jobs0", registry=registry)
    assert jobs.worker == "jobs0" and "jobs0" in jobs.owner
    job_id = jobs.create_job(payload="{}")
    assert jobs.claim(job_id).claim is not None
    assert projector.offer(Event(job_id=job_id, execution_id="x", epoch=1, seq=1,
                                 type="k")) == "applied"
    assert registry.get_sample_value("corevo_claim_total",
                                     {"worker": "jobs0", "outcome": "won"}) == 1.0
    assert registry.get_sample_value("corevo_events_projected_total",
                                     {"worker": "jobs0", "outcome": "applied"}) == 1.0


def test_resolve_in_host_counts_a_bad_value_under_the_worker_and_registry(registry):
    from corevo_obs.core.settings import option, resolve_in_host

    @dataclasses.dataclass(frozen=True)
    class Knobs:
        every: float = option(1.0, minimum=0.1, maximum=10)

    knobs = resolve_in_host(Knobs, "COREVO_TELEMETRY_TEST", component="telemetry-knobs",
                            environ={"COREVO_TELEMETRY_TEST_EVERY": "fast"},
                            worker="w5", registry=registry)
    assert knobs.every == 1.0
    assert registry.get_sample_value(
        "corevo_instrumentation_errors_total", {"worker": "w5", "component": "telemetry-knobs"}
    ) == 1.0


def test_lease_stores_take_the_same_keywords(tmp_path, registry):
    """Leases too: their grants, the observer's series and absorbed failures all land under
    the one worker label and registry."""
    from corevo_obs.leases import SqliteLeaseStore

    store = SqliteLeaseStore("tq", tmp_path / "l.db", limit=1, timeout=10.0,
                             worker="lease0", registry=registry)
    assert (store.worker, store.registry) == ("lease0", registry)
    assert store.observer.worker == "lease0"  # type: ignore[attr-defined]
    lease = store.acquire()
    assert lease is not None and lease.holder.startswith("lease0@")
    lease.release()
    assert registry.get_sample_value("corevo_lease_acquire_total", {
        "worker": "lease0", "quota": "tq", "outcome": "granted"}) == 1.0
    store.close()
