"""Text that others can write (a shared metrics directory), made safe to print.

A newline in a field read from ``.corevo/stalls/<pid>.json`` or in a file name under the
metrics directory would let anyone who can write the directory add whole lines to the
gunicorn master's log, a scrape or a CLI report (``[CRITICAL] ...``); an escape sequence
would drive the reader's terminal. The readers escape such text once, where they parse
it, so every consumer gets it escaped.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["printable"]

#: C0 and C1 controls, DEL and the Unicode line and paragraph separators
_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    return _NAMED.get(ch) or (f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def printable(text: str, *, keep: str = "") -> str:
    """``text`` with every control character but those in ``keep`` written as an escape.

    >>> printable("stalled\\n[CRITICAL] forged \\x1b[2J")
    'stalled\\\\n[CRITICAL] forged \\\\x1b[2J'
    """
    if text.isprintable():
        return text  # the common case, without the regex
    return _CONTROL.sub(lambda m: m.group() if m.group() in keep else _escape(m), text)
