"""Rule families, one module each, every code registered once in :mod:`.base`:
catalogued calls (COB100-COB109), declared blocking (COB111), interprocedural chains
(COB110), and the run's own diagnostics (COB900, COB901)."""

from . import catalogued, chains, declared, meta
from .base import FAMILIES, RULES, Rule, Selection, message

__all__ = ["FAMILIES", "RULES", "Rule", "Selection", "catalogued", "chains", "declared",
           "message", "meta"]
