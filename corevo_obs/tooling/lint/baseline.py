"""A shrink-only baseline for legacy findings.

Entries are fingerprints (path, code, enclosing function, stripped source line) with a
count (and, for a finding that rests on a stall seen at run time, the stall it cites), so
unrelated edits that move lines do not invalidate them. A listed finding is
hidden; an entry that matches nothing any more is reported (COB901) until the baseline is
rewritten, and rewriting keeps only entries that still match: it can shrink, never grow.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ...core.errors import ConfigError
from ...core.fileio import read_regular, write_files
from ...core.nesting import loads_json
from .model import Finding

VERSION = 1
Key = tuple[str, str, str, str]


def _key(f: Finding) -> Key:
    return (Path(f.path).as_posix(), f.code, f.context, f.snippet)


def load_baseline(path: str | Path) -> Counter[Key]:
    file = Path(path)
    try:
        data = loads_json(read_regular(file).decode("utf-8"))
        if data.get("version") != VERSION:
            raise ValueError(f"unsupported version {data.get('version')!r}")
        return Counter({(e["path"], e["code"], e["context"], e["snippet"]): int(e["count"])
                        for e in data["entries"]})
    except FileNotFoundError:
        raise ConfigError("baseline file not found", source=str(file)) from None
    except OSError as exc:  # a directory, a FIFO, no permission
        raise ConfigError(f"cannot read baseline: {exc.strerror or exc}",
                          source=str(file)) from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"not a corevo-obs lint baseline: {exc}", source=str(file)) from None


def apply_baseline(findings: Sequence[Finding],
                   baseline: Counter[Key]) -> tuple[list[Finding], list[Key]]:
    """Findings not covered by the baseline, and baseline entries that matched nothing."""
    left = Counter(baseline)
    kept: list[Finding] = []
    for f in findings:
        k = _key(f)
        if left[k] > 0:
            left[k] -= 1
        else:
            kept.append(f)
    stale = sorted(k for k, n in left.items() if n > 0)
    return kept, stale


def write_baseline(path: str | Path, findings: Sequence[Finding],
                   previous: Counter[Key] | None) -> int:
    """Write the baseline; with a previous one, keep only what it already listed.

    The file is replaced atomically: a failed write (full disk, read-only or missing
    folder) leaves the old baseline in place and raises ConfigError naming the path.
    """
    current = Counter(_key(f) for f in findings)
    if previous is not None:
        current = current & previous
    sources = {_key(f): f.source for f in findings if f.source}
    entries = [{"path": k[0], "code": k[1], "context": k[2], "snippet": k[3], "count": n,
                **({"source": sources[k]} if k in sources else {})}
               for k, n in sorted(current.items())]
    text = json.dumps({"version": VERSION, "entries": entries}, indent=2) + "\n"
    try:
        write_files([(Path(path), text.encode("utf-8"))])  # all or nothing, no temp left
    except OSError as exc:
        raise ConfigError(f"cannot write baseline: {exc.strerror or exc}",
                          source=exc.filename or str(path)) from None
    return sum(current.values())
