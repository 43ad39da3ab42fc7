"""The async PostgreSQL job store under the faults of test_fault_postgres (private cluster):
a SIGSTOPped server ends every awaited claim within the same bound while the loop stays
free, an immediate stop fails fast and the async pool reconnects, and a reply lost after
the commit is read back through the shared core, never a second winner."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

from prometheus_client import CollectorRegistry

from corevo_obs.claims import AsyncPostgresJobStore, ClaimOutcome
from corevo_obs.core.errors import BackendUnavailable
from corevo_obs.loop import LoopLagSampler
from tests.helpers.pg_cluster import PgCluster
from tests.helpers.pg_proxy import PgProxy
from tests.test_fault_postgres import (  # noqa: F401 - the fixtures
    BOUND,
    FAST,
    RECOVER_WITHIN,
    SLACK,
    _errors,
    cluster,
    cluster_up,
)

#: the loop must keep ticking while claims wait on a frozen server: far below BOUND
LOOP_FREE = 0.25


def _store(dsn: str, registry: CollectorRegistry, worker: str, **opts: Any
           ) -> AsyncPostgresJobStore:
    return AsyncPostgresJobStore(dsn, table=f"jobs_{uuid.uuid4().hex[:8]}", worker=worker,
                                 registry=registry, **{**FAST, **opts})


async def _timed(store: AsyncPostgresJobStore, job: str
                 ) -> tuple[float, ClaimOutcome | BackendUnavailable]:
    t0 = time.monotonic()
    try:
        result: ClaimOutcome | BackendUnavailable = await store.claim(job)
    except BackendUnavailable as exc:
        result = exc
    return time.monotonic() - t0, result


async def _recover(store: AsyncPostgresJobStore, jobs: list[str]) -> ClaimOutcome:
    t0 = time.monotonic()
    while True:
        took, result = await _timed(store, jobs.pop())
        assert took <= BOUND + SLACK, f"a claim took {took:.2f}s"
        if isinstance(result, ClaimOutcome):
            return result
        assert time.monotonic() - t0 < RECOVER_WITHIN, f"no recovery: {result}"
        await asyncio.sleep(0.05)


def test_sigstopped_server_ends_each_awaited_claim_within_the_bound_loop_free(
        cluster_up: PgCluster, registry: CollectorRegistry) -> None:  # noqa: F811
    async def main() -> None:
        store = _store(cluster_up.dsn, registry, "ab")
        jobs = [await store.create_job() for _ in range(60)]
        first = await store.claim(jobs.pop())
        pids = cluster_up.freeze()
        sampler = LoopLagSampler(interval=0.005, worker="probe", registry=CollectorRegistry())
        sampler.start()
        frozen_at = time.monotonic()
        try:
            # four concurrent claims at a time: each pooled connection meets the freeze
            while time.monotonic() - frozen_at < 5.0:
                results = await asyncio.gather(*(_timed(store, jobs.pop()) for _ in range(4)))
                for took, result in results:
                    assert isinstance(result, BackendUnavailable), result
                    assert took <= BOUND + SLACK, took
        finally:
            await sampler.aclose()
            cluster_up.thaw(pids)
        won = await _recover(store, jobs)
        assert first.won and won.won and _errors(registry, "ab") >= 4
        assert sampler.max_lag < LOOP_FREE, f"the loop stalled {sampler.max_lag:.2f}s"
        # statements that sat in the frozen server's sockets may commit after SIGCONT: the
        # store kept their tokens and gives back exactly the ones that did
        rows, _ = await store.db.run(f"SELECT id FROM {store.table} WHERE owner IS NOT NULL "
                                     "AND state = 'queued' AND id <> :a AND id <> :b",
                                     {"a": first.job_id, "b": won.job_id})
        assert await store.give_back_undecided() == len(rows) <= FAST.get("pool_size", 4)
        print(f"\n[pg SIGSTOP, async store] worst loop lag {sampler.max_lag * 1000:.1f} ms; "
              f"{len(rows)} late commits given back")
        await store.db.run(f"DROP TABLE {store.table}", {})
        await store.aclose()

    asyncio.run(main())


def test_immediate_stop_fails_fast_and_the_async_pool_reconnects(
        cluster_up: PgCluster, registry: CollectorRegistry) -> None:  # noqa: F811
    async def main() -> None:
        store = _store(cluster_up.dsn, registry, "aa")
        jobs = [await store.create_job() for _ in range(60)]
        assert (await store.claim(jobs.pop())).won
        cluster_up.stop("immediate")
        down_at = time.monotonic()
        while time.monotonic() - down_at < 1.5:
            took, result = await _timed(store, jobs.pop())
            assert isinstance(result, BackendUnavailable), result
            assert result.backend == "postgresql" and took <= BOUND + SLACK
        await asyncio.to_thread(cluster_up.start)
        assert (await _recover(store, jobs)).won
        await store.aclose()

    asyncio.run(main())


def test_a_reply_lost_after_commit_is_read_back_by_the_async_store(
        cluster_up: PgCluster, registry: CollectorRegistry) -> None:  # noqa: F811
    proxy = PgProxy(cluster_up.port)

    async def main() -> None:
        store = _store(proxy.dsn(), registry, "ac")
        try:
            job = await store.create_job()
            proxy.cut_reply_to(b"SET owner")       # the CLAIM commits, its reply is lost
            won = await store.claim(job)
            assert proxy.cuts == 1 and won.claim is not None and won.claim.epoch == 1
            row = await store.get(job)
            assert row is not None and row.token == won.claim.token
            assert not (await store.claim(job)).won
            assert _errors(registry, "ac") == 1
        finally:
            await store.aclose()

    try:
        asyncio.run(main())
    finally:
        proxy.close()
