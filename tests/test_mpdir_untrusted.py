"""Text read from the metrics directory reaches no log, exposition or report raw.

Anyone who can write the directory chooses stall reports, metric keys and file names; a
newline in one of them would be a forged line in the gunicorn master's log, a forged
sample in a scrape, or a forged line of ``metrics compact``'s report. The readers escape
control characters where they parse (``core.untrusted.printable``), so every consumer
gets them escaped.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.mmap_dict import mmap_key

from corevo_obs.core.guard import reset_for_tests
from corevo_obs.core.untrusted import printable
from corevo_obs.integrations.frozen_kills import KillCounter, report_kill
from corevo_obs.mpdir import LockedMultiProcessCollector
from corevo_obs.mpdir.dbfile import encode
from corevo_obs.mpdir.stalls import write_ongoing

FORGED = "[2026-01-01 00:00:00 +0000] [1] [CRITICAL] forged"


def test_printable_escapes_every_control_character_and_nothing_else() -> None:
    assert printable("plain text, é, ü, 漢字") == "plain text, é, ü, 漢字"
    assert printable("a\nb\rc\x00d\x1b[2Je\x7ff\x85g\u2028h") == \
        "a\\nb\\rc\\x00d\\x1b[2Je\\x7ff\\x85g\\u2028h"
    assert printable("k\tv\n", keep="\t") == "k\tv\\n"


def test_a_planted_stall_report_forges_no_line_of_the_masters_log(tmp_path: Path) -> None:
    """The consumer the issue names: the master's timeout-kill report (gunicorn's logger
    is a ``logging.Logger``; here one writing to a file, as gunicorn's does)."""
    pid = 424242
    write_ongoing(tmp_path, {"worker": f"w0\n{FORGED}", "duration_seconds": 31.0,
                             "ended_at": time.time(), "cause": f"blocking\r{FORGED}",
                             "culprit": {"file": f"app.py\n{FORGED}", "line": 1,
                                         "function": "h"},
                             "project_frames": [f"app.py:1:h\n{FORGED}", "\x1b[2J"]})
    stalls = tmp_path / ".corevo" / "stalls"
    data = json.loads((stalls / f"{os.getpid()}.json").read_text())
    (stalls / f"{pid}.json").write_text(json.dumps({**data, "pid": pid}))
    log = logging.getLogger("test.gunicorn.error")
    out = tmp_path / "master.log"
    handler = logging.FileHandler(out)
    handler.setFormatter(logging.Formatter("[%(asctime)s] [%(process)d] [%(levelname)s] "
                                           "%(message)s"))
    log.addHandler(handler)
    try:
        text = report_kill(log, tmp_path, "w0", pid, 30.0, KillCounter())
    finally:
        log.removeHandler(handler)
        handler.close()
    lines = out.read_text().splitlines()
    # its own lines only: the head (with where it stalled), the frames heading, 2 frames
    assert len(lines) == 4 and "while frozen" in lines[0], lines
    assert not any(line.startswith("[2026-01-01") or "\x1b" in line for line in lines), lines
    assert "\\n[2026-01-01" in text and "\\x1b[2J" in text


def test_planted_keys_and_file_names_forge_no_sample_and_no_log_line(tmp_path: Path,
                                                                       caplog) -> None:
    reset_for_tests()  # the absorbed failure's line is logged once per component
    d = tmp_path / "metrics"
    d.mkdir()
    good = mmap_key("app_events_total", "app_events_total", ["kind"], ["a"], "events")
    planted = json.dumps(["x", "x_total", {"kind": f"v\x1b[2J\r{FORGED}"},
                          f"help\r{FORGED}"])
    hostile_name = json.dumps(["y\ny_total 1e9\n#", "y\ny_total 1e9\n#", {}, "h"])
    (d / "counter_1.db").write_bytes(encode({good: (3.0, 0.0), planted: (1.0, 0.0),
                                             hostile_name: (2.0, 0.0)}))
    (d / f"counter_2\n{FORGED}.db").write_bytes(b"\xff" * 16)  # corrupt: named in a log
    reg = CollectorRegistry()
    LockedMultiProcessCollector(reg, path=str(d))
    with caplog.at_level(logging.WARNING, logger="corevo_obs"):
        body = generate_latest(reg).decode()
    assert 'app_events_total{kind="a"} 3.0' in body
    assert not any(line.startswith(("[2026", "y_total")) or "\r" in line or "\x1b" in line
                   for line in body.splitlines()), body
    said = [r.getMessage() for r in caplog.records if "mpdir-collect" in r.getMessage()]
    assert said and all("\n" not in m for m in said) and "counter_2\\n[2026" in said[0]



def test_compact_reports_a_planted_path_on_one_line(tmp_path: Path) -> None:
    """``metrics compact`` names each file it left in place: one line each, even when the
    directory's own name carries a newline."""
    d = tmp_path / f"metrics\n{FORGED}"
    d.mkdir()
    gone = subprocess.Popen(["true"])
    gone.wait()  # a dead writer's pid
    (d / f"counter_{gone.pid}.db").write_bytes(b"\xff" * 16)  # corrupt: left in place
    res = subprocess.run([sys.executable, "-m", "corevo_obs.cli.main", "metrics", "compact",
                          str(d)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    left = [x for x in res.stderr.splitlines() if "left in place" in x]
    assert len(left) == 1 and "metrics\\n[2026" in left[0], res.stderr
    assert not any(line.startswith("[2026") for line in res.stderr.splitlines()), res.stderr
