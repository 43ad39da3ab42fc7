"""The suite's own blocking APIs are known to its lint: a sync store's I/O method inside
``async def`` is a COB111 finding naming the async twin; offloaded it is not."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

from corevo_obs.core.marker import is_blocking
from corevo_obs.tooling.lint import lint_paths
from corevo_obs.tooling.lint.call_catalog import load_catalog

SERVICE = '''
import asyncio
from corevo_obs.claims import JobStore, PostgresJobStore, SqliteJobStore
from corevo_obs.leases import RedisLeaseStore, SqliteLeaseStore

jobs = SqliteJobStore("/tmp/jobs.db")
pg = PostgresJobStore("postgresql://db/app")
leases = SqliteLeaseStore("llm", "/tmp/leases.db", limit=2)
redis_leases = RedisLeaseStore("llm", "redis://localhost", limit=2)


async def on_loop(job_id: str) -> None:
    won = jobs.claim(job_id)
    pg.start(won.claim)
    leases.acquire()
    redis_leases.release("h")


async def typed(store: JobStore, job_id: str) -> None:
    store.candidates()


async def offloaded(job_id: str) -> None:
    won = await asyncio.to_thread(jobs.claim, job_id)
    await asyncio.to_thread(pg.start, won.claim)
    await asyncio.to_thread(leases.acquire)
    await asyncio.to_thread(redis_leases.release, "h")


def in_a_thread(job_id: str) -> None:
    jobs.claim(job_id)
'''


def test_sync_store_methods_in_async_def_are_findings_naming_the_async_twin(tmp_path: Path):
    src = tmp_path / "service.py"
    src.write_text(SERVICE)
    result = lint_paths([str(src)])
    found = {(f.line, f.code): f.message for f in result.findings}
    lines = SERVICE.splitlines()
    at = {n + 1: line.strip() for n, line in enumerate(lines)}
    flagged = {at[line] for line, _ in found}
    assert flagged == {"won = jobs.claim(job_id)", "pg.start(won.claim)", "leases.acquire()",
                       'redis_leases.release("h")', "store.candidates()"}, found
    assert {code for _, code in found} == {"COB111"}
    messages = " | ".join(found.values())
    for twin in ("AsyncSqliteJobStore", "AsyncPostgresJobStore", "AsyncSqliteLeaseStore",
                 "AsyncRedisLeaseStore"):
        assert twin in messages


def test_the_catalog_lists_exactly_the_library_methods_marked_blocking():
    """The runtime guard reads the @blocking markers, the lint the catalog: for every
    corevo-obs type the catalog lists, the same methods."""
    catalog = load_catalog()
    ours = {name: rule for name, rule in catalog.objects.items()
            if name.startswith("corevo_obs.")}
    assert len(ours) >= 6
    for name, rule in ours.items():
        module, _, attr = name.rpartition(".")
        cls = getattr(importlib.import_module(module), attr)
        marked = {m for m, fn in inspect.getmembers(cls, inspect.isfunction)
                  if is_blocking(fn)}
        assert rule.methods == marked, name
        assert rule.code == "COB111" and rule.why, name
