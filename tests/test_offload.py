"""The offload adapter with real threads and a real blocking callable that counts itself."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from corevo_obs.core.errors import ConfigError, CorevoObsError
from corevo_obs.offload import (
    AdapterClosed,
    OffloadAdapter,
    OffloadRejected,
    QueueFull,
    SlotSunk,
    WaitTimeout,
)

LIMIT = 3


class BlockingProbe:
    """A blocking callable that measures how many threads are inside it at once.

    Call ``i`` blocks until ``open(i)`` (or ``open_all``); ``sleep`` instead makes every
    call block for a fixed time. ``fail`` lists call ids that raise after blocking.
    ``entered`` is in the order the threads got a CPU: calls started together are
    compared sorted (3.13 once ran 2 before 1).
    """

    def __init__(self, *, sleep: float | None = None, fail: frozenset[int] = frozenset()):
        self._lock = threading.Lock()
        self._gates: dict[int, threading.Event] = {}
        self._all = threading.Event()
        self.sleep = sleep
        self.fail = fail
        self.inside = 0
        self.peak = 0
        self.entered: list[int] = []
        self.returned: list[int] = []

    def gate(self, i: int) -> threading.Event:
        with self._lock:
            return self._gates.setdefault(i, threading.Event())

    def open(self, i: int) -> None:
        self.gate(i).set()

    def open_all(self) -> None:
        self._all.set()
        with self._lock:
            gates = list(self._gates.values())
        for g in gates:
            g.set()

    def __call__(self, i: int) -> int:
        with self._lock:
            self.inside += 1
            self.peak = max(self.peak, self.inside)
            self.entered.append(i)
        try:
            if self.sleep is not None:
                time.sleep(self.sleep)
            else:
                gate = self.gate(i)
                while not (gate.wait(0.01) or self._all.is_set()):
                    pass
            if i in self.fail:
                raise ValueError(f"call {i} failed")
            return i
        finally:
            with self._lock:
                self.inside -= 1
                self.returned.append(i)


async def until(cond) -> None:
    async with asyncio.timeout(5.0):
        while not cond():  # noqa: ASYNC110 - polls state set by threads
            await asyncio.sleep(0.005)


def sample(registry, name: str, **labels: str) -> float:
    got = registry.get_sample_value(name, {"worker": "w0", "adapter": "store", **labels})
    return 0.0 if got is None else got


def make(registry, **kw) -> tuple[OffloadAdapter, list[BaseException]]:
    """An adapter on a pool much larger than its limit: only the adapter bounds threads."""
    errors: list[BaseException] = []
    opts = {"max_in_flight": LIMIT, "max_waiting": 50, "wait_timeout": 10.0, **kw}
    adapter = OffloadAdapter(
        name="store", registry=registry, worker="w0", on_background_error=errors.append,
        executor=POOL, **opts,
    )
    return adapter, errors


POOL = ThreadPoolExecutor(max_workers=16, thread_name_prefix="test-offload")


async def running(adapter: OffloadAdapter, probe: BlockingProbe, *ids: int) -> list[asyncio.Task]:
    """Start ``adapter.run(probe, i)`` for each id and wait until all are inside the probe."""
    tasks = [asyncio.create_task(adapter.run(probe, i)) for i in ids]
    await until(lambda: all(i in probe.entered for i in ids))
    return tasks


def operation(adapter: OffloadAdapter, n: int) -> asyncio.Task:
    """The adapter's hidden operation task of the ``n``-th running call, in admission order."""
    return list(adapter._running)[n]


def test_cancelled_callers_keep_their_slot_until_the_thread_returns(registry):
    probe = BlockingProbe(fail=frozenset({1}))

    async def main() -> None:
        adapter, errors = make(registry)
        first = await running(adapter, probe, *range(LIMIT))
        for t in first:
            t.cancel()
        await asyncio.gather(*first, return_exceptions=True)
        assert all(t.cancelled() for t in first)
        # the callers are gone, their thread calls are not: no slot was freed
        assert adapter.in_flight == LIMIT
        assert sample(registry, "corevo_offload_in_flight") == LIMIT

        later = [asyncio.create_task(adapter.run(probe, i)) for i in range(10, 10 + LIMIT)]
        await asyncio.sleep(0.2)
        assert sorted(probe.entered) == [0, 1, 2] and adapter.waiting == LIMIT
        assert sample(registry, "corevo_offload_waiting") == LIMIT

        # one thread call returns: exactly one slot frees, exactly one waiter enters
        probe.open(0)
        await until(lambda: len(probe.entered) == LIMIT + 1)
        await asyncio.sleep(0.1)
        assert probe.returned == [0] and len(probe.entered) == LIMIT + 1
        assert adapter.waiting == LIMIT - 1

        # a call whose caller was cancelled fails: only the callback can tell anyone
        probe.open(1)
        await until(lambda: len(errors) == 1)
        assert isinstance(errors[0], ValueError)
        probe.open_all()
        assert sorted(await asyncio.gather(*later)) == [10, 11, 12]
        await adapter.aclose()
        assert adapter.in_flight == 0 and adapter.sunk == 0

    asyncio.run(main())
    assert probe.peak == LIMIT
    assert sample(registry, "corevo_offload_in_flight") == 0
    assert sample(registry, "corevo_offload_errors_total") == 1
    assert sample(registry, "corevo_offload_duration_seconds_count", outcome="error") == 1
    assert sample(registry, "corevo_offload_duration_seconds_count", outcome="ok") == 5
    assert sample(registry, "corevo_offload_slot_wait_seconds_count") == 2 * LIMIT
    assert sample(registry, "corevo_offload_limit") == LIMIT


def test_cancellation_storm_never_exceeds_the_limit(registry):
    limit, calls = 4, 60
    probe = BlockingProbe(sleep=0.02)
    rng = random.Random(7)

    async def main() -> None:
        adapter, errors = make(registry, max_in_flight=limit, max_waiting=calls)
        tasks = [asyncio.create_task(adapter.run(probe, i)) for i in range(calls)]
        cancelled = 0
        while not all(t.done() for t in tasks):
            await asyncio.sleep(rng.uniform(0.001, 0.01))
            victim = rng.choice(tasks)
            if not victim.done():
                victim.cancel()
                cancelled += 1
            assert probe.inside <= limit and adapter.in_flight <= limit
        await adapter.aclose()  # drains the calls whose callers were cancelled
        assert cancelled > 5 and errors == []
        ran = [t for t in tasks if not t.cancelled()]
        assert sorted(t.result() for t in ran) == sorted(set(probe.returned) - {
            i for i, t in enumerate(tasks) if t.cancelled()
        })

    asyncio.run(main())
    assert probe.peak <= limit
    assert probe.inside == 0 and len(probe.returned) == len(probe.entered)
    assert sample(registry, "corevo_offload_in_flight") == 0
    assert sample(registry, "corevo_offload_waiting") == 0


def test_cancelled_operation_sinks_its_slot(registry):
    probe = BlockingProbe()

    async def main() -> None:
        adapter, errors = make(registry, max_in_flight=2)
        (caller,) = await running(adapter, probe, 0)
        operation(adapter, 0).cancel()  # what loop shutdown does: the thread runs on
        with pytest.raises(asyncio.CancelledError):
            await caller
        # its thread still runs, so it is still in flight, and its slot is gone
        assert adapter.sunk == 1 and adapter.in_flight == 1
        assert sample(registry, "corevo_offload_in_flight") == 1
        assert isinstance(errors[0], SlotSunk) and errors[0].remaining == 1
        # fail closed: one slot is gone for good, so only one more call runs at once
        more = [asyncio.create_task(adapter.run(probe, i)) for i in (1, 2)]
        await until(lambda: probe.inside == 2)
        await asyncio.sleep(0.2)
        assert probe.entered == [0, 1] and adapter.waiting == 1
        probe.open(0)  # the sunk thread returns: it leaves the count, its slot stays sunk
        await until(lambda: adapter.in_flight == 1)
        await asyncio.sleep(0.2)
        assert probe.entered == [0, 1] and adapter.waiting == 1 and adapter.sunk == 1
        probe.open_all()
        assert await asyncio.gather(*more) == [1, 2]
        await adapter.aclose()
        assert adapter.in_flight == 0

    asyncio.run(main())
    assert probe.peak == 2
    assert sample(registry, "corevo_offload_sunk_slots_total") == 1
    assert sample(registry, "corevo_offload_duration_seconds_count", outcome="cancelled") == 1


def test_slot_granted_to_a_caller_cancelled_at_that_instant_is_passed_on(registry):
    probe = BlockingProbe()

    async def main() -> None:
        adapter, _ = make(registry, max_in_flight=1)
        (first,) = await running(adapter, probe, 0)
        granted = asyncio.create_task(adapter.run(probe, 1))
        nxt = asyncio.create_task(adapter.run(probe, 2))
        await until(lambda: adapter.waiting == 2)
        # cancel `granted` in the very callback that hands it the freed slot, before it
        # resumes (a thread-side callback could not hit that instant reliably)
        release = adapter._release

        def release_then_cancel() -> None:
            release()
            if not granted.cancelling():
                granted.cancel()

        adapter._release = release_then_cancel  # type: ignore[method-assign]
        probe.open_all()
        assert await first == 0 and await nxt == 2
        with pytest.raises(asyncio.CancelledError):
            await granted
        assert adapter.in_flight == 0 and adapter.waiting == 0
        assert await adapter.run(probe, 3) == 3  # the slot was not lost either
        await adapter.aclose()

    asyncio.run(main())
    assert probe.entered == [0, 2, 3]


def test_queue_full_and_wait_timeout_are_typed_and_counted(registry):
    probe = BlockingProbe()

    async def main() -> None:
        adapter, _ = make(registry, max_in_flight=1, max_waiting=1, wait_timeout=0.2)
        (first,) = await running(adapter, probe, 0)
        queued = asyncio.create_task(adapter.run(probe, 1))
        await until(lambda: adapter.waiting == 1)
        with pytest.raises(QueueFull) as full:
            await adapter.run(probe, 2)
        assert full.value.adapter == "store" and full.value.reason == "queue_full"
        with pytest.raises(WaitTimeout) as late:
            await queued
        assert isinstance(late.value, OffloadRejected) and isinstance(late.value, CorevoObsError)
        assert 0.2 <= late.value.waited < 1.0
        assert adapter.waiting == 0
        probe.open_all()
        assert await first == 0
        assert await adapter.run(probe, 3) == 3  # the freed slot is usable again
        await adapter.aclose()

    asyncio.run(main())
    assert probe.entered == [0, 3]
    assert sample(registry, "corevo_offload_rejected_total", reason="queue_full") == 1
    assert sample(registry, "corevo_offload_rejected_total", reason="timeout") == 1
    assert sample(registry, "corevo_offload_waiting") == 0


def test_aclose_stops_admissions_then_drains(registry):
    probe = BlockingProbe()

    async def main() -> None:
        adapter, _ = make(registry, max_in_flight=2)
        calls = await running(adapter, probe, 0, 1)
        queued = asyncio.create_task(adapter.run(probe, 2))
        await until(lambda: adapter.waiting == 1)
        calls[0].cancel()  # a cancelled caller's call must still be drained
        closing = asyncio.create_task(adapter.aclose())
        with pytest.raises(AdapterClosed):
            await queued
        with pytest.raises(AdapterClosed):
            await adapter.run(probe, 3)
        await asyncio.sleep(0.1)
        assert not closing.done()  # both thread calls still run
        probe.open_all()
        await closing
        assert sorted(probe.returned) == [0, 1]
        assert await calls[1] == 1

    asyncio.run(main())
    assert sorted(probe.entered) == [0, 1]
    assert sample(registry, "corevo_offload_rejected_total", reason="closed") == 2


def test_caller_sees_its_own_error_and_callback_stays_quiet(registry):
    async def main() -> list[BaseException]:
        adapter, errors = make(registry)
        with pytest.raises(ValueError, match="call 5 failed"):
            await adapter.run(BlockingProbe(sleep=0.0, fail=frozenset({5})), 5)
        await adapter.aclose()
        return errors

    assert asyncio.run(main()) == []
    assert sample(registry, "corevo_offload_errors_total") == 1


def test_bad_options_are_reported_together(registry):
    with pytest.raises(ConfigError) as err:
        OffloadAdapter(name="Bad Name", max_in_flight=0, wait_timeout=-1, registry=registry)
    msg = str(err.value)
    assert "name" in msg and "max_in_flight" in msg and "wait_timeout" in msg


def test_in_flight_is_the_threads_inside_the_call_through_every_kind_of_giving_up(registry):
    """Caller cancelled, caller timed out, operation cancelled: the count stays true."""
    probe = BlockingProbe()
    broken: list[str] = []

    async def main() -> None:
        adapter, errors = make(registry)

        def check() -> None:
            gauge = sample(registry, "corevo_offload_in_flight")
            inside = probe.inside  # read on the loop: only threads leaving can change it
            if not inside <= adapter.in_flight == gauge <= LIMIT:
                broken.append(f"inside {inside}, in_flight {adapter.in_flight}, gauge {gauge}")

        async def watch() -> None:
            while True:
                check()
                await asyncio.sleep(0.001)

        async def settled(threads: int) -> None:
            await until(lambda: probe.inside == adapter.in_flight == threads)
            await asyncio.sleep(0.05)  # nothing else may move in the meantime
            assert probe.inside == adapter.in_flight == threads
            assert sample(registry, "corevo_offload_in_flight") == threads

        async def timed_out(i: int) -> int:
            async with asyncio.timeout(0.5):
                return await adapter.run(probe, i)

        watcher = asyncio.create_task(watch())
        calls = [asyncio.create_task(adapter.run(probe, 0)),
                 asyncio.create_task(timed_out(1)),
                 asyncio.create_task(adapter.run(probe, 2)),
                 asyncio.create_task(adapter.run(probe, 3)),
                 asyncio.create_task(adapter.run(probe, 4))]
        await settled(LIMIT)
        assert adapter.waiting == 2

        calls[0].cancel()  # the caller gives up
        with pytest.raises(TimeoutError):
            await calls[1]  # the caller times out
        operation(adapter, 2).cancel()  # the operation is cancelled: its thread runs on
        await until(lambda: adapter.sunk == 1)
        await settled(LIMIT)  # three threads are still inside, whatever the callers did
        assert sorted(probe.entered) == [0, 1, 2] and adapter.waiting == 2

        probe.open(0)  # a cancelled caller's thread returns: exactly one waiter enters
        await until(lambda: 3 in probe.entered)
        await settled(LIMIT)
        probe.open(2)  # the sunk operation's thread returns: it leaves, its slot stays sunk
        await settled(LIMIT - 1)
        assert 4 not in probe.entered and adapter.waiting == 1
        probe.open(1)  # the timed-out caller's thread returns: the last waiter enters
        await until(lambda: 4 in probe.entered)
        await settled(LIMIT - 1)

        # no slot leaked and none was released twice: LIMIT - sunk at once, never more
        more = [asyncio.create_task(adapter.run(probe, i)) for i in range(20, 24)]
        await settled(LIMIT - 1)
        probe.open_all()
        assert await asyncio.gather(calls[3], calls[4], *more) == [3, 4, 20, 21, 22, 23]
        await settled(0)
        await adapter.aclose()
        watcher.cancel()
        assert [type(e) for e in errors] == [SlotSunk]

    asyncio.run(main())
    assert broken == []
    assert probe.peak == LIMIT and probe.inside == 0
    assert sample(registry, "corevo_offload_in_flight") == 0
    assert sample(registry, "corevo_offload_sunk_slots_total") == 1
