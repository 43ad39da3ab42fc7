"""Nothing raises into the host: every Observer method fed bad values, a lag listener
that always raises, a watchdog whose clock fails and whose state two threads drain."""

from __future__ import annotations

import asyncio
import inspect
import math
import os
import threading
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from corevo_obs import install_loop_health
from corevo_obs.loop.watchdog import StallWatchdog
from corevo_obs.observer import MetricsObserver, Observer

HERE = os.path.realpath(__file__)
NAN, INF = float("nan"), float("inf")

# One valid call per public Observer method; a method added later without an entry fails
# test_every_observer_method_and_parameter_is_covered.
VALID: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "lease_acquired": (("q", "granted"), {"reaped": 1, "held": 2, "limit": 3,
                                          "seconds": 0.01}),
    "lease_heartbeat": (("q", "renewed"), {}),
    "lease_released": (("q", "released"), {"held_seconds": 0.5}),
    "lease_audited": (("q",), {"oldest_age": 1.5, "orphaned": 1}),
    "lease_counted": (("q",), {"held": 2, "limit": 3}),
    "claim": (("won",), {"queue_wait": 0.2}),
    "started": (("started",), {"claim_to_start": 0.1}),
    "reclaimed": ((2,), {}),
    "terminal": (("completed", 1), {}),
    "dispatch_path": (("local",), {}),
    "event_projected": (("applied",), {}),
    "replayed": ((3,), {}),
    "cancel_requested": ((), {}),
    "cancel_delivered": (("pubsub",), {"latency": 0.05}),
    "command_routed": (("applied",), {}),
    "late_side_effect": ((), {}),
}
COUNTS = {"reaped", "held", "limit", "orphaned", "n"}
SECONDS = {"seconds", "held_seconds", "queue_wait", "claim_to_start", "latency",
           "oldest_age"}
LABELS = {"outcome", "state", "path"}
BAD_COUNT = [-1, -0.5, NAN, INF, -INF, 10**400, 2**60, True, "3", b"3", [1], object()]
BAD_SECONDS = [NAN, INF, -INF, 1e300, 10**400, True, "0.1", [0.1], object()]
BAD_LABEL = ["bogus", "", 5, None, b"granted", ["won"]]
BAD_NAME = ["", 5, None, b"q", ("q",)]


def _methods() -> list[str]:
    return sorted(n for n, f in vars(Observer).items()
                  if callable(f) and not n.startswith("_"))


def _bad_values(param: inspect.Parameter) -> list[Any]:
    if param.name == "quota":
        return BAD_NAME
    if param.name in LABELS:
        return BAD_LABEL
    if param.name in COUNTS:
        return BAD_COUNT + ([] if param.default is None else [None])
    assert param.name in SECONDS, param.name
    return BAD_SECONDS + ([] if param.default is None else [None])


def _cases() -> list[tuple[str, str, Any]]:
    out = []
    for name in _methods():
        for param in list(inspect.signature(getattr(Observer, name)).parameters.values())[1:]:
            out += [(name, param.name, bad) for bad in _bad_values(param)]
    return out


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[Any, ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for m in registry.collect() for s in m.samples
            if not s.name.endswith("_created")
            and not s.name.startswith("corevo_instrumentation_errors")}


def _errors(registry: CollectorRegistry, component: str = "observer") -> float:
    return registry.get_sample_value(
        "corevo_instrumentation_errors_total", {"worker": "w0", "component": component}) or 0


def _call(obs: Observer, name: str, param: str | None = None, value: Any = None) -> Any:
    args, kwargs = VALID[name]
    params = list(inspect.signature(getattr(Observer, name)).parameters)[1:]
    bound = dict(zip(params, args, strict=False)) | dict(kwargs)
    if param is not None:
        bound[param] = value
    positional = [bound.pop(p) for p in params[:len(args)] if p in bound]
    return getattr(obs, name)(*positional, **bound)


def test_every_observer_method_and_parameter_is_covered() -> None:
    assert sorted(VALID) == _methods()
    for name in _methods():
        for param in list(inspect.signature(getattr(Observer, name)).parameters.values())[1:]:
            assert param.name in COUNTS | SECONDS | LABELS | {"quota"}, (name, param.name)


@pytest.fixture(scope="module")
def primed() -> tuple[MetricsObserver, CollectorRegistry]:
    registry = CollectorRegistry()
    obs = MetricsObserver(worker="w0", registry=registry)
    for name in _methods():
        _call(obs, name)
    assert _errors(registry) == 0
    return obs, registry


@pytest.mark.parametrize(("method", "param", "bad"), _cases(),
                         ids=lambda v: repr(v)[:24] if not isinstance(v, str) else v)
def test_a_bad_value_is_absorbed_counted_and_writes_nothing(primed, method, param, bad):
    obs, registry = primed
    before, errors = _samples(registry), _errors(registry)
    assert _call(obs, method, param, bad) is None       # returned normally
    assert _errors(registry) == errors + 1              # counted once
    assert _samples(registry) == before                 # and nothing of the call written


def test_no_sample_is_nan_inf_or_negative_after_the_bad_calls(primed):
    _, registry = primed
    for (name, labels), value in _samples(registry).items():
        assert math.isfinite(value) and value >= 0, (name, labels, value)


def test_a_negative_duration_counts_as_zero(registry):
    """Two hosts' clocks may disagree: the observation is kept, at 0, not refused."""
    obs = MetricsObserver(worker="w0", registry=registry)
    obs.claim("won", queue_wait=-0.3)
    obs.lease_released("q", "released", held_seconds=-1)
    assert _errors(registry) == 0
    assert registry.get_sample_value("corevo_claim_queue_wait_seconds_count",
                                     {"worker": "w0"}) == 1
    assert registry.get_sample_value("corevo_claim_queue_wait_seconds_sum",
                                     {"worker": "w0"}) == 0
    assert registry.get_sample_value("corevo_lease_hold_seconds_sum",
                                     {"worker": "w0", "quota": "q"}) == 0


def test_the_first_failure_is_logged_once(registry, caplog):
    from corevo_obs.core import guard

    guard.reset_for_tests()
    obs = MetricsObserver(worker="w0", registry=registry)
    with caplog.at_level("DEBUG", logger="corevo_obs"):
        for _ in range(5):
            obs.reclaimed(-1)
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "observer" in warnings[0].getMessage()
    assert _errors(registry) == 5


async def handler_sleeps(seconds: float) -> None:
    time.sleep(seconds)  # noqa: ASYNC251 PLANTED-STALL


def test_a_raising_lag_listener_keeps_the_heartbeat_and_the_watchdog_alive(registry):
    calls = {"beat": 0, "stall": 0}

    def beat_listener(_now: float, _lag: float) -> None:
        calls["beat"] += 1
        raise RuntimeError("a host listener with a bug")

    def stall_listener(_report: object) -> None:
        calls["stall"] += 1
        raise RuntimeError("so is this one")

    heartbeat = ("corevo_event_loop_heartbeat_timestamp_seconds", {"worker": "w0"})

    async def main() -> tuple[list[tuple[float, float]], bool, bool]:
        health = install_loop_health(registry=registry, worker="w0", interval=0.01)
        health.sampler.add_listener(beat_listener)
        assert health.watchdog is not None
        health.watchdog.add_listener(stall_listener)
        seen: list[tuple[float, float]] = []
        start = time.monotonic()
        while time.monotonic() - start < 2.0:
            await asyncio.sleep(0.1)
            seen.append((time.time(), registry.get_sample_value(*heartbeat) or 0.0))
            if len(seen) == 10:
                await handler_sleeps(0.3)
        alive = health.watchdog.running and not health._task.done()  # type: ignore[union-attr]
        await health.aclose()
        return seen, alive, health.watchdog.running

    seen, alive_before_stop, alive_after_stop = asyncio.run(main())
    assert alive_before_stop and not alive_after_stop
    assert calls["beat"] >= 50                                      # ~150 ticks in 2 s
    assert _errors(registry, "lag_listener") == calls["beat"]       # each one counted
    stamps = [beat for _, beat in seen]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)  # always advancing
    assert max(now - beat for now, beat in seen[-5:]) < 0.5        # fresh to the end
    stalls = registry.get_sample_value("corevo_event_loop_stalls_total", {"worker": "w0"})
    assert stalls is not None and stalls >= 1                      # the planted one at least
    assert calls["stall"] == stalls == _errors(registry, "stall_listener")


def _divides_by_zero(_now: float, _lag: float) -> None:
    print(1 / 0)


def test_the_watchdog_still_names_the_planted_line_under_a_raising_listener(registry):
    async def main() -> list[Any]:
        health = install_loop_health(registry=registry, worker="w0", interval=0.01)
        health.sampler.add_listener(_divides_by_zero)
        await asyncio.sleep(0.3)
        await handler_sleeps(0.3)
        await asyncio.sleep(0.15)
        await health.aclose()
        return health.reports

    reports = [r for r in asyncio.run(main()) if r.duration >= 0.25]  # a CI hiccup aside
    assert len(reports) == 1 and reports[0].captured
    culprit = reports[0].culprit
    assert culprit is not None and os.path.realpath(culprit.filename) == HERE
    assert culprit.function == "handler_sleeps"
    assert abs(reports[0].duration - 0.3) < 0.05


def test_a_raising_clock_does_not_kill_the_watchdog_thread(registry):
    real = time.monotonic
    failures = {"n": 0}

    def flaky() -> float:
        if failures["n"] < 20:
            failures["n"] += 1
            raise OSError("clock source gone")
        return real()

    dog = StallWatchdog(worker="w0", registry=registry, check_interval=0.01,
                        clock=real).start()
    dog._clock = flaky
    deadline = real() + 3
    while failures["n"] < 20 and real() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    try:
        assert failures["n"] == 20 and dog.running
        assert _errors(registry, "stall_watchdog") >= 1
    finally:
        dog.close()


def test_stop_and_the_watchdog_thread_drain_ended_stalls_exactly_once(registry):
    """stop(timeout=0) runs on the loop thread while the watchdog thread checks: every
    ended stall is reported once, never twice or lost, and no exception escapes."""
    dog = StallWatchdog(worker="w0", registry=registry, threshold=0.01, check_interval=0.001,
                        max_reports=100_000, log_interval=3600).start()
    planted = 20_000
    stop = threading.Event()

    def drain() -> None:
        while not stop.is_set():
            with dog._state:
                reports = dog._drain_ended()
            dog._record_all(reports)

    drainer = threading.Thread(target=drain)
    drainer.start()
    for i in range(planted):
        dog.beat(time.monotonic(), 0.02)
        if i % 1000 == 0:  # the loop-thread side, concurrently: close()'s body, since
            # close() itself runs it once per start (core/lifecycle.py) and this re-arms
            StallWatchdog.close.__wrapped__(dog, timeout=0)  # type: ignore[attr-defined]
            dog._stop.clear()
    stop.set()
    drainer.join()
    dog.close()
    assert len(dog.reports) == planted
    assert registry.get_sample_value(
        "corevo_event_loop_stalls_total", {"worker": "w0"}) == planted
    assert _errors(registry, "stall_watchdog") == 0


def test_a_forked_child_logs_its_own_first_failure(caplog) -> None:
    """A gunicorn worker is forked from a master that may have logged a component's
    failure already: the worker's own first one still gets its line (it was silent, so a
    worker's values held in memory on a full disk left no trace)."""
    from corevo_obs.core import guard

    guard.reset_for_tests()
    guard.absorb("forked-probe", OSError("in the parent"), registry=CollectorRegistry())
    r, w = os.pipe()
    child = os.fork()
    if child == 0:
        os.close(r)
        first = "forked-probe" not in guard._seen
        os.write(w, b"1" if first else b"0")
        os._exit(0)
    os.close(w)
    said = os.read(r, 1)
    os.close(r)
    os.waitpid(child, 0)
    assert said == b"1", "the child inherited its parent's 'already logged'"
