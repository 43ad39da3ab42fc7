"""Import cost: what ``import corevo_obs``, the pytest plugin and the lint add.

Issue 19 targets: ``import corevo_obs`` adds ≤ 20 ms over importing ``asyncio`` and
``prometheus_client`` (and loads no optional backend); the pytest plugin adds ≤ 20 ms
to a pytest start-up; ``import corevo_obs.tooling.lint`` loads no runtime module. Each figure is
``python -X importtime`` in a fresh interpreter: the cumulative microseconds of the
modules the import adds, after the baseline modules are already imported in the same
process, so interpreter start-up and the baseline cancel out. Medians of ``--rounds``.

    python bench/import_bench.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys

CASES = {
    "corevo_obs": ("import asyncio, prometheus_client", "import corevo_obs"),
    "corevo_obs + its public API": (
        "import asyncio, prometheus_client",
        "import corevo_obs; corevo_obs.install_loop_health; corevo_obs.StageRecorder"),
    "pytest plugin": ("import pytest", "import corevo_obs.integrations.pytest_plugin"),
    "corevo_obs.tooling.lint": ("import ast, tomllib", "import corevo_obs.tooling.lint"),
}
TARGET_MS = {"corevo_obs": 20.0, "pytest plugin": 20.0}
LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|(\s*)(\S+)")


def added_us(baseline: str, target: str) -> tuple[float, list[str]]:
    """Microseconds the ``target`` statement spends importing, and the modules it adds."""
    code = f"{baseline}\nimport sys\n_before = set(sys.modules)\n{target}"
    out = subprocess.run([sys.executable, "-X", "importtime", "-c", code],
                         capture_output=True, text=True, check=True).stderr
    lines = out.splitlines()
    marker = len(subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"{baseline}\nimport sys"],
        capture_output=True, text=True, check=True).stderr.splitlines())
    total, mods = 0, []
    for line in lines[marker:]:
        m = LINE.match(line)
        if m and len(m.group(3)) == 1:  # top-level entries only: cumulative covers children
            total += int(m.group(2))
        if m:
            mods.append(m.group(4))
    return total, mods


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    print(f"added import time, median of {args.rounds} fresh interpreters")
    for name, (baseline, target) in CASES.items():
        times: list[float] = []
        mods: list[str] = []
        for _ in range(args.rounds):
            us, mods = added_us(baseline, target)
            times.append(us)
        ms = statistics.median(times) / 1000
        ours = [m for m in mods if m.startswith("corevo_obs")]
        target_ms = TARGET_MS.get(name)
        verdict = "" if target_ms is None else (
            f"  target <= {target_ms:.0f} ms: {'ok' if ms <= target_ms else 'MISSED'}")
        print(f"  {name:30s} {ms:7.2f} ms  {len(mods):3d} modules ({len(ours)} ours){verdict}")


if __name__ == "__main__":
    main()
