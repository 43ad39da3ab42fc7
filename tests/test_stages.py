"""Four-stage histograms against injected intervals, mark errors, bounded labels, OTel spans."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import time

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from corevo_obs.stages import (
    BoundedValues,
    StageRecorder,
    TaskStages,
    current_stages,
    external,
    track_task,
)

MODEL_LATENCY = 0.08  # the fixed-latency fake model
REMOTE_AGE = 0.10  # accepted on another worker this long before we saw it
LOOP_BLOCK = 0.12  # sync I/O on the loop between accept and the handler's start


async def fake_model() -> str:
    await asyncio.sleep(MODEL_LATENCY)
    return "reply"


def value(registry, name: str, **labels: str) -> float:
    got = registry.get_sample_value(name, labels)
    return 0.0 if got is None else got


def assert_within(observed_sum: float, count: float, low: float, high: float) -> None:
    """The mean lies in what the test itself timed around the marks (+/- 5 ms for two
    clocks read at different moments): a bound a loaded machine cannot break."""
    mean = observed_sum / count
    assert low - 0.005 <= mean <= high + 0.005, (mean, low, high)


Stamps = dict[str, list[float]]


def _stamp(stamps: Stamps | None, name: str) -> None:
    if stamps is not None:
        stamps.setdefault(name, []).append(time.monotonic())


async def run_chat_turn(stages: TaskStages, stamps: Stamps | None = None) -> None:
    """One turn; ``stamps`` collects the monotonic time just before and after each mark."""
    _stamp(stamps, "started<")
    stages.started()
    _stamp(stamps, "started>")
    for turn in ("1", "2"):
        _stamp(stamps, f"enter{turn}<")
        async with stages.external("model"):
            _stamp(stamps, f"enter{turn}>")
            await fake_model()
            _stamp(stamps, f"exit{turn}<")
        _stamp(stamps, f"exit{turn}>")
        if turn == "1":
            _stamp(stamps, "first<")
            stages.first_event()
            _stamp(stamps, "first>")
    _stamp(stamps, "finish<")
    stages.finish("completed")
    _stamp(stamps, "finish>")


def test_histograms_match_injected_intervals(registry):
    """Each interval is at least what was injected and at most what the test timed around
    its two marks (no fixed slack: a loaded machine stretches both alike)."""
    rec = StageRecorder(worker="w0", registry=registry, kinds={"chat"})
    n = 4
    stamps: Stamps = {}
    made: list[float] = []

    async def main() -> None:
        made.append(time.monotonic())
        accepted_at = time.time() - REMOTE_AGE
        trackers = [rec.task("chat", accepted_at=accepted_at) for _ in range(n)]
        made.append(time.monotonic())
        tasks = [asyncio.create_task(run_chat_turn(t, stamps)) for t in trackers]
        time.sleep(LOOP_BLOCK)  # noqa: ASYNC251 - the blocked loop dispatch must reveal
        await asyncio.gather(*tasks)

    asyncio.run(main())
    # a tracker reads its monotonic now, then the wall clock for the age: both in made's
    # span, so its accept instant is within that span again of made - REMOTE_AGE
    accepted_lo = made[0] - REMOTE_AGE - (made[1] - made[0])
    accepted_hi = made[1] - REMOTE_AGE

    def since_accept(mark: str) -> tuple[float, float]:
        return (sum(stamps[mark + "<"]) / n - accepted_hi,
                sum(stamps[mark + ">"]) / n - accepted_lo)

    def between(start: str, end: str, times: int) -> tuple[float, float]:
        lo = sum(sum(stamps[f"{end}{t}<"]) - sum(stamps[f"{start}{t}>"]) for t in "12")
        hi = sum(sum(stamps[f"{end}{t}>"]) - sum(stamps[f"{start}{t}<"]) for t in "12")
        return lo / times, hi / times

    lab = {"worker": "w0", "kind": "chat"}
    dispatch = REMOTE_AGE + LOOP_BLOCK
    assert value(registry, "corevo_task_dispatch_seconds_count", **lab) == n
    dispatch_sum = value(registry, "corevo_task_dispatch_seconds_sum", **lab)
    assert dispatch_sum / n >= dispatch - 0.005  # the blocked loop is in it
    assert_within(dispatch_sum, n, *since_accept("started"))
    first = value(registry, "corevo_task_first_event_seconds_sum", **lab)
    assert first / n >= dispatch + MODEL_LATENCY - 0.005
    assert_within(first, n, *since_accept("first"))
    ext = {**lab, "dependency": "model"}
    assert value(registry, "corevo_task_external_seconds_count", **ext) == 2 * n
    external = value(registry, "corevo_task_external_seconds_sum", **ext)
    assert external / (2 * n) >= MODEL_LATENCY - 0.005
    assert_within(external, 2 * n, *between("enter", "exit", 2 * n))
    tot = {**lab, "outcome": "completed"}
    assert value(registry, "corevo_task_total_seconds_count", **tot) == n
    total = value(registry, "corevo_task_total_seconds_sum", **tot)
    assert total / n >= dispatch + 2 * MODEL_LATENCY - 0.005
    assert_within(total, n, *since_accept("finish"))
    # the 0.22 s dispatch lands above the 0.2 bucket, not in it: the tail is visible
    assert value(registry, "corevo_task_dispatch_seconds_bucket", **lab, le="0.199") == 0
    if since_accept("started")[1] < 0.3:  # a machine too loaded to say does not decide it
        assert value(registry, "corevo_task_dispatch_seconds_bucket", **lab, le="0.305") == n


def test_bad_marks_are_counted_not_raised(registry):
    rec = StageRecorder(worker="w0", registry=registry)
    t = rec.task("tool")
    t.first_event()  # before started: out of order, still a true interval
    t.started()  # out of order again (a later stage was already marked)
    t.started()  # duplicate
    t.finish("completed")
    t.finish("failed")  # duplicate
    t.first_event()  # after the end
    with t.external("store"):
        pass  # after the end, but the wait really happened: timed and counted
    t.finish("no-such-outcome")  # duplicate (already finished); never raised

    def errors(reason: str) -> float:
        return value(
            registry, "corevo_task_mark_errors_total", worker="w0", kind="tool", reason=reason
        )

    assert (errors("out_of_order"), errors("duplicate"), errors("after_end")) == (1, 3, 2)
    lab = {"worker": "w0", "kind": "tool"}
    assert value(registry, "corevo_task_dispatch_seconds_count", **lab) == 1
    assert value(registry, "corevo_task_first_event_seconds_count", **lab) == 1
    assert value(registry, "corevo_task_total_seconds_count", **lab, outcome="completed") == 1
    assert value(registry, "corevo_task_total_seconds_count", **lab, outcome="failed") == 0
    ext = {**lab, "dependency": "store"}
    assert value(registry, "corevo_task_external_seconds_count", **ext) == 1


def test_unknown_outcome_is_absorbed_as_failed(registry):
    t = StageRecorder(worker="w0", registry=registry).task("tool")
    t.finish("exploded")
    lab = {"worker": "w0", "kind": "tool", "outcome": "failed"}
    assert value(registry, "corevo_task_total_seconds_count", **lab) == 1
    assert value(
        registry, "corevo_instrumentation_errors_total", worker="w0", component="stages"
    ) == 1


def test_labels_stay_bounded(registry):
    allowed = BoundedValues({"chat", "tool"})
    assert [allowed(v) for v in ("chat", "job-123", "tool")] == ["chat", "other", "tool"]
    capped = BoundedValues(cap=2)
    assert [capped(v) for v in ("a", "b", "c", "a", "d")] == ["a", "b", "other", "a", "other"]

    rec = StageRecorder(worker="w0", registry=registry, max_kinds=2, dependencies={"model"})
    for i in range(50):
        t = rec.task(f"kind-{i}")
        with t.external(f"dep-{i}"):
            pass
        t.finish()
    kinds = {
        s.labels["kind"]
        for m in registry.collect() if m.name == "corevo_task_total_seconds"
        for s in m.samples
    }
    deps = {
        s.labels["dependency"]
        for m in registry.collect() if m.name == "corevo_task_external_seconds"
        for s in m.samples
    }
    assert kinds == {"kind-0", "kind-1", "other"}
    assert deps == {"other"}


def test_decorators_track_outcomes_and_external_calls(registry):
    rec = StageRecorder(worker="w0", registry=registry)

    @external("model")
    async def call_model() -> str:
        return await fake_model()

    @track_task("chat", recorder=rec, accepted_at_arg="accepted_at")
    async def handle(prompt: str, *, accepted_at: float, fail: type[BaseException] | None = None):
        assert current_stages() is not None
        reply = await call_model()
        stages = current_stages()
        assert stages is not None
        stages.first_event()
        if fail is not None:
            raise fail("boom")
        return reply

    async def main() -> None:
        assert await handle("hi", accepted_at=time.time() - REMOTE_AGE) == "reply"
        for exc in (RuntimeError, TimeoutError):
            with pytest.raises(exc):
                await handle("hi", accepted_at=time.time(), fail=exc)
        slow = asyncio.create_task(handle("hi", accepted_at=time.time()))
        await asyncio.sleep(MODEL_LATENCY / 2)
        slow.cancel()
        with pytest.raises(asyncio.CancelledError):
            await slow
        assert current_stages() is None
        assert await call_model() == "reply"  # outside a task: runs, not timed

    asyncio.run(main())
    lab = {"worker": "w0", "kind": "chat"}
    outcomes = {
        o: value(registry, "corevo_task_total_seconds_count", **lab, outcome=o)
        for o in ("completed", "failed", "timeout", "cancelled")
    }
    assert outcomes == {"completed": 1, "failed": 1, "timeout": 1, "cancelled": 1}
    assert value(registry, "corevo_task_external_seconds_count", **lab, dependency="model") == 4
    assert value(registry, "corevo_task_dispatch_seconds_sum", **lab) >= REMOTE_AGE - 0.005


@pytest.fixture
def exporter():
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter):
    p = TracerProvider()
    p.add_span_processor(SimpleSpanProcessor(exporter))
    yield p
    p.shutdown()


def test_spans_parents_names_and_events(registry, provider, exporter):
    rec = StageRecorder(worker="w0", registry=registry, tracer_provider=provider)
    t = rec.task(
        "chat", accepted_at=time.time() - REMOTE_AGE, job_id="job-7", execution_id="exec-7:1"
    )
    stamps: Stamps = {}
    asyncio.run(run_chat_turn(t, stamps))

    spans = exporter.get_finished_spans()
    task = next(s for s in spans if s.name == "corevo_task")
    children = [s for s in spans if s.name == "corevo_task_external"]
    assert len(spans) == 3 and len(children) == 2
    for c in children:
        assert c.parent is not None and c.parent.span_id == task.context.span_id
        assert c.context.trace_id == task.context.trace_id
        assert c.attributes["corevo.dependency"] == "model"
        took = (c.end_time - c.start_time) / 1e9
        assert MODEL_LATENCY - 0.005 <= took <= max(  # at most what the test timed around it
            stamps[f"exit{t}>"][0] - stamps[f"enter{t}<"][0] for t in "12") + 0.005
    assert task.parent is None
    assert [e.name for e in task.events] == ["started", "first_event", "finished"]
    assert dict(task.attributes).items() >= {
        "corevo.task.kind": "chat", "corevo.worker": "w0",
        "corevo.job.id": "job-7", "corevo.execution.id": "exec-7:1",
        "corevo.task.outcome": "completed",
    }.items()
    # the span starts at accept time, so its events carry the same intervals as histograms
    started = task.events[0]
    assert (started.timestamp - task.start_time) / 1e9 == pytest.approx(
        started.attributes["corevo.seconds"], abs=1e-3
    )
    assert started.attributes["corevo.seconds"] >= REMOTE_AGE - 0.005
    assert task.end_time >= max(c.end_time for c in children)
    # ids are span attributes, never metric labels
    label_values = {v for m in registry.collect() for s in m.samples for v in s.labels.values()}
    assert not {"job-7", "exec-7:1"} & label_values


def test_failed_external_marks_child_span_error(registry, provider, exporter):
    rec = StageRecorder(worker="w0", registry=registry, tracer_provider=provider)
    t = rec.task("tool")

    async def main() -> None:
        with pytest.raises(ConnectionError):
            async with t.external("store"):
                raise ConnectionError("store down")
        t.finish("failed")

    asyncio.run(main())
    spans = {s.name: s for s in exporter.get_finished_spans()}
    child = spans["corevo_task_external"]
    assert child.status.status_code == trace.StatusCode.ERROR
    assert [e.name for e in child.events] == ["exception"]
    assert spans["corevo_task"].status.status_code == trace.StatusCode.ERROR


def test_no_provider_means_no_otel_call_per_task(registry):
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        pytest.skip("a global tracer provider was set by another test")
    rec = StageRecorder(worker="w0", registry=registry)
    assert rec.tracer is None
    otel_calls: list[str] = []

    def profile(frame, event, arg) -> None:
        if event == "call" and "opentelemetry" in frame.f_code.co_filename:
            otel_calls.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        asyncio.run(run_chat_turn(rec.task("chat", job_id="job-1")))
    finally:
        sys.setprofile(None)
    assert otel_calls == []


def test_global_sdk_provider_is_picked_up(tmp_path):
    """The global provider can be set once per process, so this runs in a child."""
    script = textwrap.dedent("""
        import asyncio
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )
        from prometheus_client import CollectorRegistry
        from corevo_obs.stages import StageRecorder

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)

        async def main():
            t = StageRecorder(worker="w1", registry=CollectorRegistry()).task("chat")
            t.started()
            async with t.external("tool"):
                await asyncio.sleep(0)
            t.finish()

        asyncio.run(main())
        print(sorted(s.name for s in exporter.get_finished_spans()))
    """)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "['corevo_task', 'corevo_task_external']"


def test_stage_histograms_carry_the_task_span_as_exemplar_in_openmetrics(
        registry, provider, exporter):
    from prometheus_client.openmetrics.exposition import generate_latest as openmetrics

    rec = StageRecorder(worker="w0", registry=registry, tracer_provider=provider)
    asyncio.run(run_chat_turn(rec.task("chat")))
    (task,) = [s for s in exporter.get_finished_spans() if s.name == "corevo_task"]
    ids = f'# {{span_id="{task.context.span_id:016x}",trace_id="{task.context.trace_id:032x}"}}'
    text = openmetrics(registry).decode()
    stage_lines = [line for line in text.splitlines() if "_bucket{" in line and "# {" in line]
    names = {line.split("_bucket{")[0] for line in stage_lines}
    assert names == {"corevo_task_dispatch_seconds", "corevo_task_first_event_seconds",
                     "corevo_task_total_seconds", "corevo_task_external_seconds"}
    assert all(ids in line for line in stage_lines)
    # without a tracer: no exemplar, and the classic exposition is unchanged
    bare = CollectorRegistry()
    asyncio.run(run_chat_turn(StageRecorder(worker="w0", registry=bare).task("chat")))
    assert "# {" not in openmetrics(bare).decode()
