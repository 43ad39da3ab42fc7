"""The observer's one lease write path (prometheus_client's public API on children bound
once): the same samples as direct public calls in process and in multiprocess mode, and
exact under threads."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

from prometheus_client import CollectorRegistry

from corevo_obs.core.metrics import child
from corevo_obs.observer import MetricsObserver

VALUES = [0.0, 0.0005, 0.0007, 0.001, 0.3, 1.0, 7.5, 1e9]   # on bounds, between, +Inf


def _reference() -> CollectorRegistry:
    """What the public API records for the calls ``_drive`` makes."""
    ref = CollectorRegistry()
    for v in VALUES:
        child("corevo_lease_acquire_total", ref, worker="w0", quota="q", outcome="granted").inc()
        child("corevo_lease_reaped_total", ref, worker="w0", quota="q").inc(2)
        child("corevo_lease_held", ref, quota="q").set(3)
        child("corevo_lease_acquire_seconds", ref, worker="w0", quota="q").observe(v)
        child("corevo_lease_release_total", ref, worker="w0", quota="q", outcome="released").inc()
        child("corevo_lease_hold_seconds", ref, worker="w0", quota="q").observe(v)
        child("corevo_lease_heartbeat_total", ref, worker="w0", quota="q", outcome="lost").inc()
    return ref


DRIVE = """
import json, sys
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector
from corevo_obs.observer import MetricsObserver
obs = MetricsObserver(worker="w0")
for v in json.loads(sys.argv[1]):
    obs.lease_acquired("q", "granted", reaped=2, held=3, limit=4, seconds=v)
    obs.lease_released("q", "released", held_seconds=v)
    obs.lease_heartbeat("q", "lost")
reg = CollectorRegistry()
MultiProcessCollector(reg)
print(json.dumps([[s.name, s.labels, s.value] for m in reg.collect() for s in m.samples]))
"""


def _samples(rows) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(name, tuple(sorted((k, v) for k, v in labels.items() if k != "pid"))): value
            for name, labels, value in rows
            if name.startswith("corevo_lease_") and not name.endswith("_created")
            and "limit" not in name and value != 0}   # observers pre-bind zero series


def _drive_in_process(registry: CollectorRegistry) -> None:
    obs = MetricsObserver(worker="w0", registry=registry)
    for v in VALUES:
        obs.lease_acquired("q", "granted", reaped=2, held=3, limit=4, seconds=v)
        obs.lease_released("q", "released", held_seconds=v)
        obs.lease_heartbeat("q", "lost")


def test_in_process_values_get_the_public_api_samples(registry):
    _drive_in_process(registry)
    got = _samples([(s.name, s.labels, s.value) for m in registry.collect() for s in m.samples])
    want = _samples([(s.name, s.labels, s.value) for m in _reference().collect()
                     for s in m.samples])
    assert got == want


def test_multiprocess_values_get_the_same_samples(tmp_path):
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", DRIVE, json.dumps(VALUES)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = _samples(json.loads(out.stdout))
    want = _samples([(s.name, s.labels, s.value) for m in _reference().collect()
                     for s in m.samples])
    assert got == want


def test_exact_under_threads(registry):
    """Two observers of one worker (same children) and a public-API writer, in threads
    switching as often as they can: every update is counted."""
    n = 5_000
    a, b = MetricsObserver(worker="w0", registry=registry), MetricsObserver(
        worker="w0", registry=registry)
    public = child("corevo_lease_acquire_total", registry, worker="w0", quota="q",
                   outcome="granted")

    def via(obs: MetricsObserver) -> None:
        for _ in range(n):
            obs.lease_acquired("q", "granted", reaped=1, held=1, seconds=0.25)
            obs.lease_released("q", "released", held_seconds=0.25)

    def direct() -> None:
        for _ in range(n):
            public.inc()

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=f, args=args)
                   for f, args in ((via, (a,)), (via, (b,)), (direct, ()))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)

    def value(name, **labels):
        return registry.get_sample_value(name, {"worker": "w0", "quota": "q", **labels})

    assert value("corevo_lease_acquire_total", outcome="granted") == 3 * n
    assert value("corevo_lease_reaped_total") == 2 * n
    assert value("corevo_lease_release_total", outcome="released") == 2 * n
    assert value("corevo_lease_acquire_seconds_count") == 2 * n
    assert value("corevo_lease_acquire_seconds_sum") == 2 * n * 0.25   # exact in binary
    assert value("corevo_lease_hold_seconds_count") == 2 * n


def test_a_bad_outcome_is_absorbed_and_writes_nothing(registry):
    obs = MetricsObserver(worker="w0", registry=registry)
    obs.lease_acquired("q", "bogus", reaped=5, held=9, seconds=1.0)  # type: ignore[arg-type]
    assert registry.get_sample_value(
        "corevo_instrumentation_errors_total", {"worker": "w0", "component": "observer"}) == 1
    assert registry.get_sample_value(
        "corevo_lease_reaped_total", {"worker": "w0", "quota": "q"}) == 0
