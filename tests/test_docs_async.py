"""docs/leases-claims.md and docs/cancel.md: their code blocks are lint-clean, and the
claims example runs as written on a real SQLite file."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

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


def _as_coroutine(code: str, name: str) -> str:
    """A snippet written with top-level ``await`` as the body of ``async def name()``."""
    body = "\n".join("    " + line for line in code.splitlines())
    return f"async def {name}():\n{body}\n"


def test_the_lease_examples_work_at_the_first_request_after_provisioning(redis_url,
                                                                         monkeypatch):
    """A flushed redis-server, `corevo-obs leases provision` as the deploy step, then each
    lease example of leases-claims.md as written: a grant at once, where a quota never
    provisioned stays fenced for its whole 30 s timeout (longer than every wait)."""
    import subprocess
    import sys

    import redis
    import redis.asyncio

    from corevo_obs.leases import AsyncLeaseBuffer, AsyncShardedLeaseStore

    redis.Redis.from_url(redis_url).flushdb()
    cli = [sys.executable, "-m", "corevo_obs.cli.main", "leases", "provision", "llm",
           "--redis", redis_url]
    for extra in ([], ["--shards", "6"]):
        done = subprocess.run(cli + extra, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "provisioned" in done.stdout, done.stderr
    # the two sharded fragments (not-run on the page: they need a cluster's client);
    # the page's plain-store example runs as a script in tests/test_doc_pages.py
    examples = [b for b in blocks("leases-claims.md") if "cluster" in b and "call_model" in b]
    assert len(examples) == 2
    monkeypatch.setenv("REDIS_URL", redis_url)
    calls: list[object] = []

    async def call_model(*args: object, fence: object = None) -> str:
        calls.append(fence)
        return "ok"

    async def main() -> None:
        cluster = redis.asyncio.Redis.from_url(redis_url, socket_timeout=1,
                                               socket_connect_timeout=0.5)
        for i, code in enumerate(examples):
            space: dict[str, object] = {
                "call_model": call_model, "prompt": "hi", "cluster": cluster,
                "AsyncShardedLeaseStore": AsyncShardedLeaseStore,
                "AsyncLeaseBuffer": AsyncLeaseBuffer}
            exec(compile(_as_coroutine(code, "example"), f"example {i}", "exec"), space)
            # a fenced quota would refuse for 30 s: hold(wait=5) would raise LeaseRejected
            await asyncio.wait_for(space["example"](), 15)   # type: ignore[operator]
        await cluster.aclose()

    asyncio.run(main())
    # the sharded hold passes its lease's fencing token; the buffer's call passes none
    assert len(calls) == 2 and calls[0] is not None and int(calls[0]) > 0  # type: ignore[call-overload]


def test_the_cancel_example_runs_and_cancels_at_the_first_request(tmp_path):
    """docs/cancel.md as written, as a script in a temp dir: the owner runs a job through
    the async job store, the gateway cancels it, the owner stops ``cancelled``."""
    import os
    import subprocess
    import sys

    (tmp_path / "cancel_example.py").write_text(blocks("cancel.md")[0])
    env = {**os.environ, "PYTHONPATH": str(DOCS.parent)}
    done = subprocess.run([sys.executable, "cancel_example.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "cancelled", done.stdout
