"""One Scope (worker label + registry) resolved once and shared by the components."""

from __future__ import annotations

import asyncio
import dataclasses
import os

import pytest
from prometheus_client import REGISTRY, CollectorRegistry

from corevo_obs.core import guard
from corevo_obs.core.errors import ConfigError
from corevo_obs.core.scope import Scope
from corevo_obs.loop import LoopLagSampler, StallWatchdog


def test_explicit_keywords_win_over_the_environment(monkeypatch, registry):
    monkeypatch.setenv("COREVO_WORKER", "from-env")
    scope = Scope.resolve(worker="w3", registry=registry)
    assert (scope.worker, scope.registry) == ("w3", registry)


def test_environment_then_pid_then_global_registry(monkeypatch):
    monkeypatch.setenv("COREVO_WORKER", "from-env")
    assert Scope.resolve() == Scope("from-env", REGISTRY)
    monkeypatch.delenv("COREVO_WORKER")
    assert Scope.resolve().worker == f"pid{os.getpid()}"


def test_an_explicit_scope_wins_over_the_environment(monkeypatch, registry):
    scope = Scope("w0", registry)
    monkeypatch.setenv("COREVO_WORKER", "from-env")
    assert Scope.resolve(scope=scope) is scope
    assert Scope.resolve(worker="w0", registry=registry, scope=scope) is scope


def test_a_scope_with_a_different_worker_names_both(registry):
    with pytest.raises(ConfigError) as caught:
        Scope.resolve(worker="w1", scope=Scope("w0", registry))
    assert "scope=Scope(worker='w0') and worker='w1'" in str(caught.value)


def test_a_scope_with_a_different_registry_names_both(registry):
    with pytest.raises(ConfigError) as caught:
        Scope.resolve(registry=CollectorRegistry(), worker="w1", scope=Scope("w0", registry))
    assert "scope=Scope(worker='w0') and worker='w1' and a different registry=" in str(
        caught.value)


def test_a_bad_worker_name_is_refused_however_the_scope_is_built(registry):
    with pytest.raises(ConfigError, match="1-64 characters"):
        Scope("not a label!", registry)
    with pytest.raises(ConfigError, match="worker argument"):
        Scope.resolve(worker="", registry=registry)


def test_a_scope_is_immutable(registry):
    with pytest.raises(dataclasses.FrozenInstanceError):
        Scope("w0", registry).worker = "w1"  # type: ignore[misc]


def test_absorb_counts_in_the_scope(registry):
    guard.absorb("scope-test", RuntimeError("boom"), scope=Scope("w7", registry))
    assert registry.get_sample_value(
        "corevo_instrumentation_errors_total", {"worker": "w7", "component": "scope-test"}
    ) == 1.0
    # the old keywords still work (leases call absorb with them)
    guard.absorb("scope-test", RuntimeError("boom"), worker="w7", registry=registry)
    assert registry.get_sample_value(
        "corevo_instrumentation_errors_total", {"worker": "w7", "component": "scope-test"}
    ) == 2.0


def test_components_keep_worker_and_registry_keywords(registry):
    sampler = LoopLagSampler(worker="w2", registry=registry)
    assert sampler.scope == Scope("w2", registry)
    assert sampler.worker == "w2"


def test_a_component_refuses_a_scope_and_a_different_worker(registry):
    with pytest.raises(ConfigError, match="worker='w9'"):
        StallWatchdog(scope=Scope("w0", registry), worker="w9")


def test_one_scope_shared_by_loop_components_gives_one_label_and_registry(
    monkeypatch, registry
):
    from corevo_obs import install_loop_health

    monkeypatch.setenv("COREVO_WORKER", "not-this-one")
    scope = Scope("shared", registry)

    async def main() -> None:
        async with install_loop_health(scope=scope, interval=0.01) as health:
            await asyncio.sleep(0.05)
        assert health.scope is scope and health.worker == "shared"
        assert health.config.worker == "shared"
        assert health.watchdog is not None and health.watchdog.scope is scope

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


def test_stages_recorder_middleware_and_decorator_share_a_scope(registry):
    from corevo_obs.integrations.asgi import StagesMiddleware
    from corevo_obs.stages import StageRecorder, shared_recorder, track_task

    scope = Scope("web0", registry)
    rec = StageRecorder(scope=scope)
    assert (rec.worker, rec.registry) == ("web0", registry)
    assert shared_recorder(scope=scope) is shared_recorder(scope=scope)

    async def app(_s, _r, _send) -> None:
        return None

    middleware = StagesMiddleware(app, scope=scope)
    assert middleware.recorder.scope is scope
    with pytest.raises(ConfigError, match="worker='web1'"):
        StagesMiddleware(app, scope=scope, worker="web1")

    @track_task("job", scope=scope)
    async def job() -> None:
        return None

    rec.task("chat").finish("completed")
    asyncio.run(job())
    for kind in ("chat", "job"):
        assert registry.get_sample_value(
            "corevo_task_total_seconds_count",
            {"worker": "web0", "kind": kind, "outcome": "completed"}) == 1.0


def test_one_scope_gives_offload_observer_and_sampler_one_worker_and_registry(
    monkeypatch, registry
):
    from corevo_obs.observer import MetricsObserver
    from corevo_obs.offload import OffloadAdapter

    monkeypatch.setenv("COREVO_WORKER", "not-this-one")
    scope = Scope.resolve(worker="host1", registry=registry)
    adapter = OffloadAdapter(name="sdk", max_in_flight=2, scope=scope)
    observer = MetricsObserver(scope=scope)
    sampler = LoopLagSampler(scope=scope)
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


def test_job_store_and_projector_share_a_scope(tmp_path, registry):
    from corevo_obs.claims import SqliteJobStore
    from corevo_obs.events import Event, Projector

    scope = Scope("jobs0", registry)
    jobs = SqliteJobStore(tmp_path / "jobs.db", scope=scope)
    projector = Projector(lambda _e: None, scope=scope)
    assert jobs.worker == "jobs0" and "jobs0" in jobs.owner
    job_id = jobs.create_job(payload="{}")
    assert jobs.claim(job_id).claim is not None
    assert projector.offer(Event(job_id=job_id, execution_id="x", epoch=1, seq=1,
                                 type="k")) == "applied"
    assert registry.get_sample_value("corevo_claim_total",
                                     {"worker": "jobs0", "outcome": "won"}) == 1.0
    assert registry.get_sample_value("corevo_events_projected_total",
                                     {"worker": "jobs0", "outcome": "applied"}) == 1.0


def test_resolve_in_host_counts_a_bad_value_in_the_scope(registry):
    from corevo_obs.core.settings import option, resolve_in_host

    @dataclasses.dataclass(frozen=True)
    class Knobs:
        every: float = option(1.0, minimum=0.1, maximum=10)

    knobs = resolve_in_host(Knobs, "COREVO_SCOPE_TEST", component="scope-knobs",
                            environ={"COREVO_SCOPE_TEST_EVERY": "fast"},
                            scope=Scope("w5", registry))
    assert knobs.every == 1.0
    assert registry.get_sample_value(
        "corevo_instrumentation_errors_total", {"worker": "w5", "component": "scope-knobs"}
    ) == 1.0
