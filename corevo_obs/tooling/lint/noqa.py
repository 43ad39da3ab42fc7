"""``# noqa: CODE`` on the reported line silences that code there. So do, unless the
project turns them off, a bare ``# noqa`` (``bare-noqa``) and the code of a peer tool's
rule that the finding's rule covers (``peer-noqa``: ``# noqa: ASYNC230`` silences the
COB100 that flake8-async and ruff report there as ASYNC230), so a project migrating from
them does not annotate every line twice."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .rules import RULES

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


@dataclass(frozen=True)
class NoqaPolicy:
    """Which noqa comments silence a finding besides ``# noqa: <its code>``."""

    bare: bool = True   # a noqa comment naming no code silences every code (bare-noqa)
    peers: bool = True  # a peer's code the rule lists silences it (peer-noqa)

    def silences(self, code: str, codes: frozenset[str] | None) -> bool:
        if not codes:
            return False
        if code in codes or (self.bare and BARE in codes):
            return True
        rule = RULES.get(code)
        return self.peers and rule is not None and not codes.isdisjoint(rule.peers)


DEFAULT_NOQA = NoqaPolicy()
