"""The workers of one server open a new SQLite file at the same moment (the example app
under `uvicorn --workers 2` did, and one worker's startup failed with "database is
locked"): every store must open, in real racing processes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

OPEN_ALL = """
import sys, time
from prometheus_client import CollectorRegistry
from corevo_obs.cancel import SqliteCancelBus
from corevo_obs.claims import SqliteJobStore
from corevo_obs.events import EventHistory
from corevo_obs.leases import SqliteLeaseStore
db, go = sys.argv[1], float(sys.argv[2])
while time.time() < go:
    pass
reg = CollectorRegistry()
stores = [SqliteJobStore(db, worker="w0", registry=reg),
          SqliteLeaseStore("q", db, limit=2, busy_timeout=1.0, worker="w0", registry=reg),
          SqliteCancelBus(db), EventHistory(db)]
print("opened")
"""


def test_processes_opening_a_new_file_at_once_all_open(tmp_path: Path) -> None:
    opened = 0
    rounds, procs_per_round = 8, 3
    for i in range(rounds):
        db = tmp_path / f"race{i}.db"
        go = time.time() + 1.0  # every process is past its imports by then
        procs = [subprocess.Popen([sys.executable, "-c", OPEN_ALL, str(db), str(go)],
                                  cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for _ in range(procs_per_round)]
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0 and out.strip() == "opened", err[-1500:]
            opened += 1
    assert opened == rounds * procs_per_round
