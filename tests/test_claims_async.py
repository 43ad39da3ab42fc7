"""The async job stores: the sync protocol tests run unchanged against them, and they keep
the loop free where the sync stores stall it (real SQLite file, real PostgreSQL)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from corevo_obs.claims import (
    AsyncJobStore,
    AsyncPostgresJobStore,
    AsyncSqliteJobStore,
    JobStore,
    PostgresJobStore,
    SqliteJobStore,
)
from corevo_obs.core.errors import ConfigError
from corevo_obs.loop.schedstat import ThreadProbe, parse
from tests import test_claims

# the protocol tests of test_claims, collected again here against ``backend`` below
PROTOCOL = [getattr(test_claims, name) for name in (
    "test_exactly_one_claim_wins_and_epoch_token_fence_the_start",
    "test_local_fast_path_is_owned_at_once_and_counted",
    "test_prestart_reclaim_requeues_with_a_new_epoch_and_fences_the_old_owner",
    "test_reclaim_by_claim_age",
    "test_recover_uses_owner_liveness",
    "test_running_job_of_a_vanished_owner_becomes_lost_never_rerun",
    "test_terminal_transitions_carry_the_execution_identity",
)]

BUDGET = 0.020      # the loop-lag budget of issue 24: no stall over 20 ms (of the code's)
HELD = 0.4          # how long another client holds the lock the claims wait on
CLAIMS = 200


class BlockingView:
    """An ``AsyncJobStore`` driven from the test's thread on a loop of its own, so the
    sync protocol tests exercise the async shell without a second copy of them."""

    def __init__(self, store: AsyncJobStore, loop: asyncio.AbstractEventLoop) -> None:
        self._store, self._loop = store, loop

    def __getattr__(self, name: str) -> Any:
        # the sync protocol's close() is the async store's aclose()
        value = getattr(self._store, "aclose" if name == "close" else name)
        if not inspect.iscoroutinefunction(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            return asyncio.run_coroutine_threadsafe(value(*args, **kwargs),
                                                    self._loop).result(30)
        return call


@dataclass
class AsyncBackend:
    dialect: str
    target: str
    table: str
    registry: Any
    loop: asyncio.AbstractEventLoop

    def __post_init__(self) -> None:
        self.opened: list[BlockingView] = []

    def store(self, **opts: Any) -> BlockingView:
        opts = {"table": self.table, "worker": "w0", "registry": self.registry, **opts}
        make = AsyncSqliteJobStore if self.dialect == "sqlite" else AsyncPostgresJobStore
        view = BlockingView(make(self.target, **opts), self.loop)
        self.opened.append(view)
        return view


@pytest.fixture
def side_loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def _drop(dsn: str, table: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"DROP TABLE IF EXISTS {table}")


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request, tmp_path, registry, side_loop):
    table = f"jobs_{uuid.uuid4().hex[:10]}"
    target = (str(tmp_path / "jobs.db") if request.param == "sqlite"
              else request.getfixturevalue("pg_dsn"))
    b = AsyncBackend(request.param, target, table, registry, side_loop)
    yield b
    for s in b.opened:
        s.close()
    if b.dialect == "postgres":
        _drop(target, table)


for _test in PROTOCOL:
    globals()[f"{_test.__name__}_async"] = _test
del _test


@pytest.mark.parametrize("api", ["sqlite", "postgres"])
def test_async_store_refuses_a_connection_outside_autocommit_and_bad_tables(api, request):
    with pytest.raises(ConfigError):
        AsyncSqliteJobStore(":memory:", table="jobs; drop table x")
    if api == "postgres":
        import psycopg

        async def check() -> None:
            conn = await psycopg.AsyncConnection.connect(request.getfixturevalue("pg_dsn"))
            try:
                with pytest.raises(ConfigError, match="autocommit"):
                    AsyncPostgresJobStore(conn)
            finally:
                await conn.close()
        asyncio.run(check())


# --- the loop stays free -------------------------------------------------------------

def _hold_sqlite_lock(path: str, table: str, ready: threading.Event) -> None:
    """Another writer: holds the file's write lock for HELD seconds."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    db.execute(f"UPDATE {table} SET payload = 'held'")
    ready.set()
    time.sleep(HELD)
    db.execute("COMMIT")
    db.close()


def _hold_pg_rows(dsn: str, table: str, ready: threading.Event) -> None:
    """Another client: holds every job row's lock for HELD seconds."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        conn.execute(f"UPDATE {table} SET payload = 'held'")
        ready.set()
        time.sleep(HELD)
        conn.commit()


class OwnLag:
    """The loop's worst lag minus the time this process's threads spent runnable but
    waiting for a CPU (schedstat run delay) in the same tick: what the code did to the
    loop, not what an overloaded host did to the process. A blocking call sleeps off the
    CPU, so it is all counted; CPU starvation is not."""

    def __init__(self, interval: float = 0.002) -> None:
        self.interval = interval
        self.worst = 0.0
        self.worst_raw = 0.0
        self._task: asyncio.Task[None] | None = None

    @staticmethod
    def _delay(probes: list[ThreadProbe]) -> float:
        total = 0
        for probe in probes:
            got = parse(probe.read())
            total += got[1] if got else 0
        return total / 1e9

    async def _run(self) -> None:
        import os

        probes = [ThreadProbe(int(t)) for t in os.listdir("/proc/self/task")]
        loop = asyncio.get_running_loop()
        try:
            while True:
                started, delay = loop.time(), self._delay(probes)
                await asyncio.sleep(self.interval)
                lag = loop.time() - started - self.interval
                self.worst_raw = max(self.worst_raw, lag)
                self.worst = max(self.worst, lag - (self._delay(probes) - delay))
        finally:
            for probe in probes:
                probe.close()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def _claims_under_lock(store: JobStore | AsyncJobStore, hold: Callable[..., None],
                             target: str, jobs: list[str]) -> tuple[float, float, int]:
    """(worst own loop lag, worst raw lag, claims won) for CLAIMS concurrent claims while
    another client holds the lock they wait on: awaited on the async store, called in
    async def on the sync one (the stall the suite exists to catch)."""
    ready = threading.Event()
    holder = threading.Thread(target=hold, args=(target, store.table, ready))
    holder.start()
    await asyncio.to_thread(ready.wait, 10)
    sampler = OwnLag()
    sampler.start()
    await asyncio.sleep(0.01)

    async def one(job: str) -> bool:
        if isinstance(store, AsyncJobStore):
            return (await store.claim(job)).won
        return store.claim(job).won            # noqa: COB111 - the stall under test

    try:
        won = sum(await asyncio.gather(*(one(j) for j in jobs)))
        await asyncio.sleep(0.02)   # the sampler's tick that spans a stall ends after it
    finally:
        await sampler.stop()
        await asyncio.to_thread(holder.join)
    return sampler.worst, sampler.worst_raw, won


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_200_async_claims_keep_the_loop_under_budget_where_sync_ones_stall_it(
        dialect, tmp_path, registry, request):
    target = (str(tmp_path / "jobs.db") if dialect == "sqlite"
              else request.getfixturevalue("pg_dsn"))
    hold = _hold_sqlite_lock if dialect == "sqlite" else _hold_pg_rows
    table = f"jobs_{uuid.uuid4().hex[:10]}"
    sync = (SqliteJobStore if dialect == "sqlite" else PostgresJobStore)(
        target, table=table, worker="w0", registry=registry)
    make = AsyncSqliteJobStore if dialect == "sqlite" else AsyncPostgresJobStore
    try:
        worst_async: list[float] = []
        raws: list[float] = []
        for _ in range(5):   # a loaded 2-core box preempts a whole process now and then
            jobs = [sync.create_job() for _ in range(CLAIMS)]

            async def run_async(jobs: list[str] = jobs) -> tuple[float, float, int]:
                store = make(target, table=table, worker="w0", registry=registry)
                await store.setup()
                try:
                    return await _claims_under_lock(store, hold, target, jobs)
                finally:
                    await store.aclose()
            lag, raw, won = asyncio.run(run_async())
            assert won == CLAIMS                   # every claim decided, none lost
            worst_async.append(lag)
            raws.append(raw)
            if lag < BUDGET:
                break
        jobs = [sync.create_job() for _ in range(CLAIMS)]
        lag_sync, _, won = asyncio.run(_claims_under_lock(sync, hold, target, jobs))
        assert won == CLAIMS
    finally:
        if dialect == "postgres":
            _drop(target, table)
        sync.close()
    print(f"{dialect}: max loop lag async {min(worst_async) * 1000:.1f} ms "
          f"(tries {[round(x * 1000, 1) for x in worst_async]}, raw "
          f"{[round(x * 1000, 1) for x in raws]}), sync {lag_sync * 1000:.0f} ms")
    assert min(worst_async) < BUDGET, worst_async
    assert lag_sync > HELD / 2, f"the sync store did not stall the loop ({lag_sync:.3f} s)"


def test_a_cancelled_async_claim_is_undecided_and_given_back(tmp_path, registry):
    """The claim's statement still commits on the store's thread after the caller gave up:
    the job names this owner with a token nobody holds until ``give_back_undecided``."""
    path = str(tmp_path / "jobs.db")
    table = "jobs"
    sync = SqliteJobStore(path, table=table, worker="w0", registry=registry)
    job = sync.create_job()

    async def main() -> int:
        store = AsyncSqliteJobStore(path, table=table, worker="w0", registry=registry)
        await store.setup()
        ready = threading.Event()
        holder = threading.Thread(target=_hold_sqlite_lock, args=(path, table, ready))
        holder.start()
        await asyncio.to_thread(ready.wait, 10)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(HELD / 4):
                await store.claim(job)
        assert job in store.undecided
        await asyncio.to_thread(holder.join)
        row = await store.get(job)                 # queued behind the claim: it committed
        assert row is not None and row.owner == store.owner
        given = await store.give_back_undecided()
        assert (await store.get(job)).owner is None    # type: ignore[union-attr]
        await store.aclose()
        return given

    assert asyncio.run(main()) == 1
    assert registry.get_sample_value("corevo_claim_reclaimed_total", {"worker": "w0"}) == 1
    sync.close()
