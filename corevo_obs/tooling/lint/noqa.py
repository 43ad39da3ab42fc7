"""``# noqa: CODE`` on the reported line silences that code there; a bare ``# noqa`` only
when the project opts in (``bare-noqa = true``), since it would also hide future rules."""

from __future__ import annotations

import re

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?",
                   re.IGNORECASE)
BARE = "*"


def noqa_codes(line: str) -> frozenset[str] | None:
    """Codes named by a noqa comment on ``line`` (``{"*"}`` for bare), None without one."""
    if "#" not in line:
        return None
    m = _NOQA.search(line)
    if m is None:
        return None
    codes = m.group("codes")
    if not codes:
        return frozenset({BARE})
    return frozenset(c.upper() for c in re.split(r"[\s,]+", codes) if c)


def is_silenced(code: str, codes: frozenset[str] | None, *, bare_noqa: bool) -> bool:
    if not codes:
        return False
    return code in codes or (bare_noqa and BARE in codes)
