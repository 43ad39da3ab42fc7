"""COB900, COB901: findings about the run itself, a file that does not parse and a
baseline entry that matches nothing any more."""

from __future__ import annotations

from .base import Family, Spec, register

PARSE = "COB900"
STALE = "COB901"


@register
class RunDiagnostics(Family):
    family = "meta"
    error_codes = {
        PARSE: Spec("syntax-error", "A file that no installed Python can parse.",
                    "cannot parse file: {error}"),
        STALE: Spec("stale-baseline", "A baseline entry that no longer matches a finding.",
                    "baseline entry no longer matches a finding ({entry}): shrink the "
                    "baseline with --write-baseline"),
    }
