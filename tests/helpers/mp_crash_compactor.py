"""A real ``corevo-obs metrics compact DIR`` that SIGKILLs itself at a chosen stage.

    mp_crash_compactor.py --die-at before_commit|after_commit|after_rename [--stop] DIR

The fault injection lives here, in the test helper, not in the library: this process
wraps two library functions before running the CLI. An outside observer cannot stop a
process between two system calls, and the stages that matter are exactly that precise:

- ``before_commit``: accumulators written and fsynced aside, journal not yet written;
- ``after_commit``: journal committed, nothing renamed yet (the new accumulators wait
  under ``.corevo/``);
- ``after_rename``: journal committed, accumulators renamed in, dead files still there
  (the state in which an unlocked reader counts a dead writer twice).

The SIGKILL is real: no exit hook, no ``finally``, the kernel drops the flocks. With
``--stop`` it SIGSTOPs itself there instead, holding the commit lock until SIGCONT: a
compactor frozen mid-commit.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path
from typing import Any

import corevo_obs.mpdir.compactor as compactor
import corevo_obs.mpdir.journal as journal
from corevo_obs.cli.main import main as cli_main

SIG = [signal.SIGKILL]


def die() -> None:
    os.kill(os.getpid(), SIG[0])


def arm(stage: str, top: Path) -> None:
    if stage in ("before_commit", "after_commit"):
        real_commit = compactor.commit  # type: ignore[attr-defined]  # its import of journal.commit

        def commit(*args: Any, **kw: Any) -> None:
            if stage == "after_commit":
                real_commit(*args, **kw)
            die()
            if stage == "before_commit":  # resumed after --stop: commit as if never stopped
                real_commit(*args, **kw)

        compactor.commit = commit  # type: ignore[attr-defined]  # the name the compactor calls
        return
    real_fsync_dir = journal.fsync_dir

    def fsync_dir(directory: Path) -> None:
        real_fsync_dir(directory)
        # roll_forward syncs the top directory right after its renames (the journal
        # commit syncs .corevo/): that is the moment
        if directory.resolve() == top.resolve() and journal.journal_path(top).exists():
            die()

    journal.fsync_dir = fsync_dir


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--die-at", required=True,
                    choices=("before_commit", "after_commit", "after_rename"))
    ap.add_argument("--stop", action="store_true")
    ap.add_argument("dir", type=Path)
    args = ap.parse_args()
    if args.stop:
        SIG[0] = signal.SIGSTOP
    arm(args.die_at, args.dir)
    return cli_main(["metrics", "compact", str(args.dir)])


if __name__ == "__main__":
    sys.exit(main())
