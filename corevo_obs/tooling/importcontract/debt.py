"""The debt file: one forbidden import a line, ``importer -> imported  # line N``.

Entries are exact module names. Wildcards are refused because one pattern can hide any
number of new violations, which would defeat a list that may only shrink.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from ...core.errors import ConfigError

_MODULE = r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*"
_ENTRY = re.compile(rf"^({_MODULE})\s*->\s*({_MODULE})$")

HEADER = (
    "# Import debt: forbidden imports that existed when the contract was adopted.\n"
    "# Shrink-only: delete a line when you fix its import; never add one.\n"
    "# Format: importer.module -> imported.module  # line N (comment, not compared)\n"
)


class DebtFileError(ConfigError):
    """The debt file is missing or has a line that is not a plain ``a.b -> c.d`` entry."""


@dataclass(frozen=True, order=True)
class DebtEntry:
    """One recorded forbidden import, compared by module names only."""

    importer: str
    imported: str

    def __str__(self) -> str:
        return f"{self.importer} -> {self.imported}"


def parse_debt(text: str, *, source: str) -> frozenset[DebtEntry]:
    """Parse debt text; raise ``DebtFileError`` naming ``source:line`` on any bad line."""
    entries: set[DebtEntry] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source}:{number}"
        if "*" in line:
            raise DebtFileError(
                f"wildcard in debt entry {line!r}: list each import on its own line",
                source=where,
            )
        match = _ENTRY.match(line)
        if match is None:
            raise DebtFileError(
                f"not a debt entry {line!r} (expected 'importer.module -> imported.module')",
                source=where,
            )
        entry = DebtEntry(match.group(1), match.group(2))
        if entry in entries:
            raise DebtFileError(f"duplicate debt entry {line!r}", source=where)
        entries.add(entry)
    return frozenset(entries)


def read_debt(path: str | Path) -> frozenset[DebtEntry]:
    """Read and parse the debt file at ``path`` (a missing file is an error, not empty)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DebtFileError(
            "debt file not found (create it with 'corevo-obs debt init')", source=str(path)
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DebtFileError(f"cannot read debt file: {exc}", source=str(path)) from None
    return parse_debt(text, source=str(path))


def render_debt(lines_by_entry: Mapping[DebtEntry, Sequence[int]]) -> str:
    """Render entries sorted, each with its line numbers as a comment."""
    body = [
        f"{entry}  # line {', '.join(str(n) for n in sorted(lines))}" if lines else str(entry)
        for entry, lines in sorted(lines_by_entry.items())
    ]
    return HEADER + "".join(f"{line}\n" for line in body)
