"""The long fault schedule: minutes of seeded, overlapping faults against a running load.

    PYTHONPATH=$PWD python bench/fault_schedule.py --seconds 600 --seed 7 \
        [--kinds redis-kill,redis-stop,pg-stop,worker-kill,cpu-hog,clock-ahead,disk-full] \
        [--workers 3] [--keep DIR] [--gunicorn] [--redis-save packaged]

The same code as tests/test_fault_schedule.py (tests/helpers/fault_plan.py, fault_run.py,
fault_checks.py), only longer: prints the schedule, the checkers' table and the recovery
time per fault kind; exit 1 if a checker failed (the schedule and the seed are printed,
so the run replays). Needs redis-server and the PostgreSQL binaries; the disk-full
faults need a tmpfs mount (root). ``--keep DIR`` leaves the records (holders' intervals,
lanes' job lines, worker logs) in DIR. ``--gunicorn`` runs the workers under a gunicorn
master (tests/helpers/fault_gunicorn_conf.py) that restarts the killed ones.
``--redis-save packaged`` runs redis-server with redis.conf's save rules (and a BGSAVE
every few seconds), so each restart loads the last snapshot; a rule string also works.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.helpers.fault_checks import check, report  # noqa: E402
from tests.helpers.fault_plan import KINDS, describe, generate  # noqa: E402
from tests.helpers.fault_run import PACKAGED_SAVE, Settings, run  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=600.0)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--keep", type=Path)
    ap.add_argument("--gunicorn", action="store_true",
                    help="the workers under a gunicorn master, which restarts the killed ones")
    ap.add_argument("--redis-save", default="",
                    help='redis save rules: "" (none), "packaged" (redis.conf\'s) or rules')
    args = ap.parse_args()
    save = PACKAGED_SAVE if args.redis_save == "packaged" else args.redis_save
    # a SIGTERM (e.g. from `timeout`) unwinds, so the servers and the tmpfs are cleaned up
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if args.seconds < 30:
        ap.error(f"--seconds must be at least 30, got {args.seconds:g}")
    try:
        faults = generate(args.seed, args.seconds, kinds=kinds, workers=args.workers)
    except ValueError as exc:
        ap.error(str(exc))
    print(describe(args.seed, faults), flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="corevo-sched.") as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        outcome = run(Settings(args.seconds, args.seed, workers=args.workers,
                               gunicorn=args.gunicorn, redis_save=save), faults, where)
        checks = check(outcome)
        print(report(outcome, checks))
    counts = Counter(f.kind for f in faults)
    failed = [c.name for c in checks if not c.ok]
    print(f"\n{args.seconds / 60:g} min (wall {time.monotonic() - started:.0f} s), "
          f"{len(faults)} faults ({', '.join(f'{k} {n}' for k, n in sorted(counts.items()))}), "
          f"seed {args.seed}: {'all checkers ok' if not failed else f'FAILED: {failed}'}")
    if failed:
        print(f"replay: PYTHONPATH=$PWD python bench/fault_schedule.py --seconds "
              f"{args.seconds:g} --seed {args.seed} --kinds {','.join(kinds)}"
              + (" --gunicorn" if args.gunicorn else "")
              + (f" --redis-save '{args.redis_save}'" if args.redis_save else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
