"""The code blocks of README.md and docs/*.md, in page order, as a reader meets them.

A page is one session: its blocks run in order in one fresh directory, so a block that a
later command uses (``myapp.py`` for ``uvicorn myapp:app``) is a file there. What a block
needs is written where the reader sees it, on its first line(s):

- ``# file: NAME`` - the block is saved as NAME (then run: ``python NAME``, or pytest for
  ``test_*.py``); without it a Python block is saved as ``snippet.py`` and run.
- ``# needs: redis`` / ``postgres`` / ``multiproc-dir`` - the environment variable the
  block reads (``$REDIS_URL``, ``$DATABASE_URL``, ``$PROMETHEUS_MULTIPROC_DIR``) is set to a
  real server or an empty directory.

Two HTML comments on the line before a fence configure the harness, not the reader:
``<!-- not-run: REASON -->`` (shown as a skip) and ``<!-- from-checkout -->`` (a command
block meant to be run from a checkout of the project: it runs in a copy of this one).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LANGS = {"python", "bash"}
NEEDS = {"redis", "postgres", "multiproc-dir"}
_HARNESS = re.compile(r"<!--\s*(not-run|from-checkout)\s*:?\s*(.*?)\s*-->")
_FILE = re.compile(r"^#\s*file:\s*(\S+)\s*$")
_NEEDS = re.compile(r"^#\s*needs:\s*(.+?)\s*$")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    source: str
    file: str | None
    needs: tuple[str, ...]
    not_run: str | None
    from_checkout: bool

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def _head(source: str) -> tuple[str | None, tuple[str, ...]]:
    """The ``# file:`` and ``# needs:`` lines at the top of a block."""
    file: str | None = None
    needs: list[str] = []
    for line in source.splitlines():
        if m := _FILE.match(line):
            file = m.group(1)
        elif m := _NEEDS.match(line):
            needs += [w for w in re.findall(r"[a-z][a-z-]*", m.group(1)) if w in NEEDS]
        else:
            break
    return file, tuple(needs)


def page_blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    for i, line in enumerate(lines):
        fence = line.strip()
        if not fence.startswith("```") or fence[3:] not in LANGS:
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip().startswith("```"))
        source = textwrap.dedent("\n".join(lines[i + 1:end])) + "\n"
        harness = _HARNESS.search(lines[i - 1]) if i else None
        file, needs = _head(source) if fence[3:] == "python" else (None, ())
        found.append(Block(
            page=str(page.relative_to(ROOT)), line=i + 1, lang=fence[3:], source=source,
            file=file, needs=needs,
            not_run=harness.group(2) if harness and harness.group(1) == "not-run" else None,
            from_checkout=bool(harness and harness.group(1) == "from-checkout")))
    return found


def all_pages() -> dict[str, list[Block]]:
    pages = {str(p.relative_to(ROOT)): page_blocks(p) for p in PAGES}
    return {name: blocks for name, blocks in pages.items() if blocks}
