"""Cost of recording the four stages of a task vs four raw prometheus_client observes.

Issue 3 target: the tracker costs at most 1.5x the hand-written baseline (pre-bound
children, ``perf_counter`` around each interval), when no OTel provider is configured.
With an SDK provider the tracker is compared with the same baseline plus the same spans
written by hand (task span, three events, one child span), so the ratio is the wrapper's
cost, not the SDK's.
Each "task" is one coroutine with one awaited external call; an empty variant (the same
coroutine, no recording) is subtracted so ratios compare recording cost only. Variants
are interleaved per round; medians of per-round figures are printed.

The OTel metrics path (issue 38) is timed in the same run: the same tracker with its
series bound through ``corevo_obs.otel.instrument_metrics`` on a real SDK
``MeterProvider`` (an ``InMemoryMetricReader``: the SDK aggregates every point), OTel
only (``stages_otel_metrics``) and beside prometheus (``stages_both``), each against the
prometheus path (``stages``). Target: <= 1.5x its cost per task. ``raw_otel_metrics``
is four ``Histogram.record`` calls written by hand on the same SDK: the SDK's own cost,
so ``stages_otel_metrics`` against it is the suite's share.

Wall time on a shared 2-core box is noisy (±5-25 %), so ``--instructions`` also counts
instructions under valgrind's callgrind, which repeat exactly: each variant runs at two
task counts and the difference divided by the extra tasks is its cost per task.

    python bench/stages_bench.py [--rounds 15] [--tasks 20000] [--instructions]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import callgrind  # bench/callgrind.py, beside this script
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from prometheus_client import CollectorRegistry

from corevo_obs.core.catalog import CATALOG
from corevo_obs.core.metrics import child
from corevo_obs.otel import instrument_metrics
from corevo_obs.stages import StageRecorder, TaskStages, shared_recorder

perf = time.perf_counter


async def _external() -> None:
    """Stands for the awaited model call; returns at once so only recording is timed."""


def _children(registry: CollectorRegistry) -> tuple[Any, Any, Any, Any]:
    """The four pre-bound histograms a hand-written baseline observes."""
    lab = {"worker": "bench", "kind": "chat"}
    return (
        child("corevo_task_dispatch_seconds", registry, **lab),
        child("corevo_task_external_seconds", registry, dependency="model", **lab),
        child("corevo_task_first_event_seconds", registry, **lab),
        child("corevo_task_total_seconds", registry, outcome="completed", **lab),
    )


def _raw(registry: CollectorRegistry) -> Callable[[], Awaitable[None]]:
    dispatch, ext, first, total = _children(registry)

    async def task() -> None:
        t0 = perf()
        dispatch.observe(perf() - t0)
        t1 = perf()
        await _external()
        ext.observe(perf() - t1)
        first.observe(perf() - t0)
        total.observe(perf() - t0)

    return task


def _raw_otel(
    registry: CollectorRegistry, provider: TracerProvider
) -> Callable[[], Awaitable[None]]:
    """The raw baseline plus the spans the tracker makes, written by hand."""
    from opentelemetry import trace

    tracer = provider.get_tracer("bench")
    dispatch, ext, first, total = _children(registry)

    async def task() -> None:
        t0 = perf()
        span = tracer.start_span(
            "corevo_task", attributes={"corevo.task.kind": "chat", "corevo.worker": "bench"}
        )
        ctx = trace.set_span_in_context(span)
        seconds = perf() - t0
        dispatch.observe(seconds)
        span.add_event("started", {"corevo.seconds": seconds})
        t1 = perf()
        sub = tracer.start_span(
            "corevo_task_external", context=ctx, attributes={"corevo.dependency": "model"}
        )
        await _external()
        ext.observe(perf() - t1)
        sub.end()
        seconds = perf() - t0
        first.observe(seconds)
        span.add_event("first_event", {"corevo.seconds": seconds})
        seconds = perf() - t0
        total.observe(seconds)
        span.set_attribute("corevo.task.outcome", "completed")
        span.add_event("finished", {"corevo.seconds": seconds})
        span.end()

    return task


def _staged(make: Callable[[], TaskStages]) -> Callable[[], Awaitable[None]]:
    async def task() -> None:
        t = make()
        t.started()
        async with t.external("model"):
            await _external()
        t.first_event()
        t.finish("completed")

    return task


def _via_recorder(rec: StageRecorder) -> Callable[[], TaskStages]:
    return lambda: rec.task("chat")


def _via_shared(registry: CollectorRegistry) -> Callable[[], TaskStages]:
    """What ``@track_task`` without a recorder does: the shared recorder looked up per task."""
    return lambda: shared_recorder(worker="bench", registry=registry).task("chat")


def _raw_otel_metrics() -> Callable[[], Awaitable[None]]:
    """Four SDK histogram records by hand (attributes built once), timed like ``raw``."""
    meter = MeterProvider([InMemoryMetricReader()]).get_meter("bench")
    lab = {"worker": "bench", "kind": "chat"}
    ext_lab, total_lab = {**lab, "dependency": "model"}, {**lab, "outcome": "completed"}
    dispatch, ext, first, total = (
        meter.create_histogram(n, unit="s", explicit_bucket_boundaries_advisory=list(
            CATALOG[n].buckets or ())).record
        for n in ("corevo_task_dispatch_seconds", "corevo_task_external_seconds",
                  "corevo_task_first_event_seconds", "corevo_task_total_seconds"))

    async def task() -> None:
        t0 = perf()
        dispatch(perf() - t0, lab)
        t1 = perf()
        await _external()
        ext(perf() - t1, ext_lab)
        first(perf() - t0, lab)
        total(perf() - t0, total_lab)

    return task


async def _once(task: Callable[[], Awaitable[None]]) -> None:
    await task()


def _otel_metrics(prometheus: bool) -> Callable[[], Awaitable[None]]:
    """The tracker whose series were bound while the OTel metrics path was on (a bound
    child keeps writing where it was bound: the path is off again once this returns)."""
    rec = StageRecorder(worker="bench", registry=CollectorRegistry())
    task = _staged(_via_recorder(rec))
    with instrument_metrics(meter_provider=MeterProvider([InMemoryMetricReader()]),
                            prometheus=prometheus):
        asyncio.run(_once(task))  # binds the kind's series and the dependency's
    return task


def _variants() -> dict[str, Callable[[], Awaitable[None]]]:
    sdk = TracerProvider()  # a real SDK provider; no exporter, so only span work is timed
    return {
        "empty": _external,
        "raw": _raw(CollectorRegistry()),
        "stages": _staged(
            _via_recorder(StageRecorder(worker="bench", registry=CollectorRegistry()))
        ),
        "stages_shared": _staged(_via_shared(CollectorRegistry())),
        "raw_otel_sdk": _raw_otel(CollectorRegistry(), sdk),
        "stages_otel_sdk": _staged(_via_recorder(
            StageRecorder(worker="bench", registry=CollectorRegistry(), tracer_provider=sdk)
        )),
        "raw_otel_metrics": _raw_otel_metrics(),
        "stages_otel_metrics": _otel_metrics(prometheus=False),
        "stages_both": _otel_metrics(prometheus=True),
    }


# what each variant's recording cost is divided by ("vs" column)
BASELINE = {"stages": "raw", "stages_shared": "raw", "raw_otel_sdk": "raw",
            "stages_otel_sdk": "raw_otel_sdk", "raw_otel_metrics": "stages",
            "stages_otel_metrics": "stages", "stages_both": "stages"}
#: the same variants against the SDK by hand: the suite's share of the OTel path
SDK_SHARE = {"stages_otel_metrics": "raw_otel_metrics"}


def _time(task: Callable[[], Awaitable[None]], n: int) -> float:
    async def main() -> float:
        for _ in range(200):  # warm up the bound children and the code paths
            await task()
        t0 = perf()
        for _ in range(n):
            await task()
        return perf() - t0

    gc.collect()
    return asyncio.run(main()) / n


def _instructions(variant: str, tasks: int) -> int:
    return callgrind.instructions([__file__, "--only", variant, "--tasks", str(tasks)])[0]


def _report_instructions(names: list[str], small: int, large: int) -> None:
    per = {
        k: (_instructions(k, large) - _instructions(k, small)) / (large - small) for k in names
    }
    print(f"instructions per task (callgrind, {large} - {small} tasks)")
    for k in names:
        rec = per[k] - per["empty"]
        vs = _vs(k, rec, {b: per[b] - per["empty"] for b in ("raw", "raw_otel_sdk", "stages")})
        print(f"{k:<18}{per[k]:>10.0f}{rec:>14.0f}{vs:>22}")


def _vs(variant: str, recording: float, bases: dict[str, float]) -> str:
    base = BASELINE.get(variant)
    if base is None:
        return "1.00x raw" if variant == "raw" else ""
    return f"{recording / bases[base]:.2f}x {base}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--tasks", type=int, default=20000)
    ap.add_argument("--instructions", action="store_true", help="also count instructions")
    ap.add_argument("--only", help=argparse.SUPPRESS)  # one variant, for callgrind
    args = ap.parse_args()
    variants = _variants()
    if args.only:
        _time(variants[args.only], args.tasks)
        return
    if args.instructions:
        if not callgrind.available():
            ap.error("--instructions needs valgrind (apt-get install valgrind)")
        _report_instructions(list(variants), 300, 3300)
    if args.rounds < 1:
        return
    per: dict[str, list[float]] = {k: [] for k in variants}
    ratios: dict[str, list[float]] = {k: [] for k in BASELINE}
    for r in range(args.rounds):
        order = list(variants)
        if r % 2:
            order.reverse()
        got = {k: _time(variants[k], args.tasks) for k in order}
        for k, v in got.items():
            per[k].append(v)
        for k, base in BASELINE.items():
            ratios[k].append((got[k] - got["empty"]) / (got[base] - got["empty"]))

    print(f"{args.rounds} interleaved rounds x {args.tasks} tasks; medians")
    print(f"{'variant':<18}{'µs/task':>10}{'recording µs':>14}{'vs':>22}")
    empty = statistics.median(per["empty"])
    for k in variants:
        med = statistics.median(per[k])
        vs = f"{statistics.median(ratios[k]):.2f}x {BASELINE[k]}" if k in BASELINE else (
            "1.00x raw" if k == "raw" else "")
        print(f"{k:<18}{med * 1e6:>10.2f}{(med - empty) * 1e6:>14.2f}{vs:>22}")
    for k, base in SDK_SHARE.items():
        share = statistics.median(
            (a - e) / (b - e) for a, b, e in zip(per[k], per[base], per["empty"], strict=True))
        print(f"{k} vs {base}: {share:.2f}x (the suite's share of the OTel path)")
    print("target: stages <= 1.5x raw (no OTel provider); stages_otel_sdk <= 1.5x raw_otel_sdk;"
          " stages_otel_metrics <= 1.5x stages (issue 38)")


if __name__ == "__main__":
    main()
