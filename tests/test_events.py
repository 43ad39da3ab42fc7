"""Event projection: order, dedupe, bounded buffer, stale epochs, durable replay."""

from __future__ import annotations

import random
import subprocess
import sys

from corevo_obs.events import Event, EventHistory, Projector


def ev(seq, epoch=1, execution="x1", job="j1", kind="delta"):
    return Event(job, execution, epoch, seq, kind, {"n": seq})


def count(registry, outcome):
    return registry.get_sample_value(
        "corevo_events_projected_total", {"worker": "w0", "outcome": outcome}) or 0.0


def make(registry, **opts):
    got: list[Event] = []
    return Projector(got.append, worker="w0", registry=registry, **opts), got


def test_in_order_and_duplicates(registry):
    p, got = make(registry)
    assert [p.offer(ev(s)) for s in (1, 2, 2, 3, 1)] == [
        "applied", "applied", "duplicate", "applied", "duplicate"]
    assert [e.seq for e in got] == [1, 2, 3]
    assert count(registry, "applied") == 3 and count(registry, "duplicate") == 2


def test_shuffled_and_repeated_delivery_comes_out_exactly_once_in_order(registry):
    for seed in range(20):
        rng = random.Random(seed)
        p, got = make(registry, max_buffer=100)
        sent = [ev(s, job=f"j{k}") for k in range(3) for s in range(1, 41)]
        sent += rng.sample(sent, 30)                 # the channel repeats some
        rng.shuffle(sent)
        for e in sent:
            p.offer(e)
        for k in range(3):
            assert [e.seq for e in got if e.job_id == f"j{k}"] == list(range(1, 41))
            assert p.pending(f"j{k}") == 0


def test_new_epoch_voids_the_old_one(registry):
    p, got = make(registry)
    assert p.offer(ev(1)) == "applied"
    assert p.offer(ev(3)) == "buffered"              # epoch 1, early
    assert p.offer(ev(2, epoch=2, execution="x2")) == "buffered"
    assert p.pending("j1") == 1                      # epoch 1's early event was discarded
    assert p.offer(ev(2)) == "stale_epoch"           # the late epoch-1 event
    assert p.offer(ev(1, epoch=2, execution="x2")) == "applied"
    assert p.offer(ev(3, epoch=2, execution="x-other")) == "stale_epoch"  # not this epoch's
    assert [(e.epoch, e.seq) for e in got] == [(1, 1), (2, 1), (2, 2)]
    assert p.position("j1") == (2, "x2", 3)
    assert count(registry, "stale_epoch") == 2


def test_overflow_is_bounded_and_replay_fills_the_gap(registry, tmp_path):
    history = EventHistory(tmp_path / "events.db")
    for s in range(1, 11):
        assert history.append(ev(s))
    assert not history.append(ev(3))                 # the executor retried: stored once
    p, got = make(registry, max_buffer=3)
    outcomes = [p.offer(ev(s)) for s in range(2, 11)]  # seq 1 was lost by the channel
    assert outcomes == ["buffered"] * 3 + ["overflow"] * 6
    assert got == [] and p.pending("j1") == 3
    assert p.replay(history.latest("j1")) == 7              # 1 and 5..10 came only from history
    assert [e.seq for e in got] == list(range(1, 11))
    assert got[0].payload == {"n": 1}
    assert count(registry, "overflow") == 6
    assert registry.get_sample_value("corevo_events_replayed_total", {"worker": "w0"}) == 7
    assert p.offer(ev(10)) == "duplicate"            # the live channel catches up later


def test_reconnect_replays_history_written_by_another_process(registry, tmp_path):
    path = tmp_path / "events.db"
    code = (
        "import sys; from corevo_obs.events import Event, EventHistory;"
        "h = EventHistory(sys.argv[1]);"
        "[h.append(Event('j1', 'x1', 1, s, 'delta', s)) for s in range(1, 6)];"
        "[h.append(Event('j1', 'x2', 2, s, 'delta', s)) for s in range(1, 4)]"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True)
    fresh, got = make(registry)                      # a new gateway, nothing seen yet
    assert fresh.replay(EventHistory(path).latest("j1")) == 3
    assert [(e.execution_id, e.seq) for e in got] == [("x2", 1), ("x2", 2), ("x2", 3)]
    assert fresh.offer(ev(4, epoch=2, execution="x2")) == "applied"  # live resumes


def test_a_failing_sink_leaves_the_event_unapplied(registry):
    calls = []

    def sink(e):
        calls.append(e.seq)
        if len(calls) == 1:
            raise ConnectionError("client gone")

    p = Projector(sink, worker="w0", registry=registry)
    try:
        p.offer(ev(1))
    except ConnectionError:
        pass
    assert p.offer(ev(1)) == "applied" and calls == [1, 1]


def test_async_history_feeds_replay_with_the_same_semantics(registry, tmp_path):
    """The loop-side twin: appends and the history read run off the loop's thread, with
    the same dedup, ordering and counts as ``EventHistory``; ``replay`` is one method."""
    import asyncio
    import threading

    from corevo_obs.events import AsyncEventHistory

    async def main() -> tuple[int, int, list[int], set[str]]:
        history = AsyncEventHistory(tmp_path / "events.db")
        stored = [await history.append(ev(s)) for s in range(1, 6)]
        again = await history.append(ev(3))          # a retry: stored once
        p, got = make(registry, max_buffer=1)
        p.offer(ev(3))
        p.offer(ev(4))                               # overflow: replay must fill it
        n = p.replay(await history.latest("j1"))
        threads = {t.name for t in threading.enumerate()}
        await history.aclose()
        sync_n = make(registry)[0].replay(EventHistory(tmp_path / "events.db").latest("j1"))
        assert all(stored) and not again
        return n, sync_n, [e.seq for e in got], threads

    n, sync_n, seqs, threads = asyncio.run(main())
    assert seqs == [1, 2, 3, 4, 5] and n == 4 and sync_n == 5
    assert any(t.startswith("corevo-events") for t in threads)
