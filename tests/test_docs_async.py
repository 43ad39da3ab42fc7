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
