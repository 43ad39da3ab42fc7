"""docs/leases-claims.md and docs/cancel.md: their code blocks are lint-clean, and the
claims example runs as written on a real SQLite file."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from corevo_obs.claims import AsyncSqliteJobStore
from corevo_obs.tooling.lint import lint_paths

DOCS = Path(__file__).parent.parent / "docs"


def blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), re.S)


def test_the_pages_code_blocks_are_lint_clean(tmp_path):
    for page in ("leases-claims.md", "cancel.md"):
        for i, code in enumerate(blocks(page)):
            body = "\n".join("    " + line for line in code.splitlines())
            (tmp_path / f"{page[:-3].replace('-', '_')}_{i}.py").write_text(
                f"async def snippet():\n{body}\n" if "await " in code.split("def ")[0]
                else code)
    result = lint_paths([str(tmp_path)])
    assert result.findings == [], [f.message for f in result.findings]


def test_the_claims_example_runs_on_the_async_store(tmp_path):
    code = next(b for b in blocks("leases-claims.md") if "async def execute" in b)
    space: dict[str, object] = {}
    exec(compile(code, "leases-claims.md", "exec"), space)

    async def main() -> str:
        jobs = AsyncSqliteJobStore(tmp_path / "jobs.db")
        job_id = await space["submit"](jobs, {"prompt": "hi"})   # type: ignore[operator]
        await space["execute"](jobs, job_id, "exec-1")           # type: ignore[operator]
        row = await jobs.get(job_id)
        await jobs.close()
        assert row is not None
        return row.state

    assert asyncio.run(main()) == "completed"


def _as_coroutine(code: str, name: str) -> str:
    """A snippet written with top-level ``await`` as the body of ``async def name()``."""
    body = "\n".join("    " + line for line in code.splitlines())
    return f"async def {name}():\n{body}\n"


def test_the_lease_examples_work_at_the_first_request_after_provisioning(redis_url):
    """A flushed redis-server, `corevo-obs leases provision` as the deploy step, then each
    lease example of leases-claims.md as written: a grant at once, where a quota never
    provisioned stays fenced for its whole 30 s timeout (longer than every wait)."""
    import subprocess
    import sys

    import redis.asyncio

    from corevo_obs.leases import AsyncLeaseBuffer, AsyncShardedLeaseStore

    cli = [sys.executable, "-m", "corevo_obs.cli.main", "leases", "provision", "llm",
           "--redis", redis_url]
    for extra in ([], ["--shards", "6"]):
        done = subprocess.run(cli + extra, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "provisioned" in done.stdout, done.stderr
    examples = [b for b in blocks("leases-claims.md") if "call_model" in b]
    assert len(examples) == 3
    tokens: list[object] = []

    async def call_model(*args: object, fence: object = None) -> str:
        tokens.append(fence)
        return "ok"

    async def main() -> None:
        cluster = redis.asyncio.Redis.from_url(redis_url, socket_timeout=1,
                                               socket_connect_timeout=0.5)
        for i, code in enumerate(examples):
            code = code.replace("redis://127.0.0.1:6379/0", redis_url)
            space: dict[str, object] = {
                "call_model": call_model, "prompt": "hi", "cluster": cluster,
                "AsyncShardedLeaseStore": AsyncShardedLeaseStore,
                "AsyncLeaseBuffer": AsyncLeaseBuffer}
            exec(compile(_as_coroutine(code, "example"), f"example {i}", "exec"), space)
            await asyncio.wait_for(space["example"](), 15)   # type: ignore[operator]
            for name in ("buffer", "quota", "store"):
                closing = getattr(space.get(name), "close", None)
                if closing is not None:
                    await closing()
        await cluster.aclose()

    asyncio.run(main())
    assert len(tokens) == 4 and all(t is None or int(t) > 0 for t in tokens)  # type: ignore[call-overload]


def test_the_cancel_example_runs_and_cancels_at_the_first_request(tmp_path):
    """docs/cancel.md as written (its DB path moved to tmp): the owner runs a job through
    the async job store, the gateway cancels it, the owner stops ``cancelled``."""
    code = blocks("cancel.md")[0].replace('"/var/lib/app/corevo.db"',
                                          repr(str(tmp_path / "corevo.db")))
    space: dict[str, object] = {}
    exec(compile(code, "cancel.md", "exec"), space)

    async def main() -> tuple[object, object, str]:
        jobs = AsyncSqliteJobStore(tmp_path / "corevo.db")
        job_id = await jobs.create_job()
        started = asyncio.Event()

        async def agent_loop(run: object) -> None:
            started.set()
            await asyncio.sleep(60)

        owner = asyncio.create_task(space["run_job"](job_id, agent_loop))  # type: ignore[operator]
        await asyncio.wait_for(started.wait(), 10)
        seen = await asyncio.wait_for(space["cancel_job"](job_id), 30)  # type: ignore[operator]
        stop = await asyncio.wait_for(owner, 30)
        row = await jobs.get(job_id)
        await jobs.close()
        assert row is not None
        return stop, seen, row.state

    stop, seen, state = asyncio.run(main())
    assert getattr(stop, "state", None) == "cancelled" and state == "cancelled"
    assert seen
