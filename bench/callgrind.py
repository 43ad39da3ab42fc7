"""Instruction counts under valgrind's callgrind, shared by the benches.

Wall time on a shared 2-core VM moves by several percent run to run; instructions repeat
exactly for the same program, inputs and hash seed, so overheads below that noise are
counted, not timed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys


def available() -> bool:
    return shutil.which("valgrind") is not None


def instructions(argv: list[str]) -> tuple[int, str]:
    """Run ``python argv...`` under callgrind: (instructions executed, its stdout)."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, *argv],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},  # hash randomisation moves the counts
    )
    found = re.search(r"Collected\s*:\s*(\d+)", out.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in callgrind output:\n{out.stderr[-2000:]}")
    return int(found.group(1)), out.stdout
