"""1,000 real short-lived writers, a quarter SIGKILLed, under a 20 Hz scraper and compactions.

The scraper process also runs the janitor (like a process that serves /metrics); graceful
children compact at exit above a threshold. Everything is real: fork, SIGKILL, flock.
"""

from __future__ import annotations

import json
import statistics
import subprocess
from pathlib import Path

from prometheus_client import CollectorRegistry

from corevo_obs.mpdir import LockedMultiProcessCollector, compact, scan
from corevo_obs.mpdir.layout import metric_files

from .conftest import helper_cmd

TOTAL, BATCH, KILL_EVERY, INC = 1000, 25, 4, 3
TYPES = 4  # counter, histogram, gauge_livesum, gauge_max per writer


def test_churn_totals_exact_scrapes_monotonic_files_bounded(worker_env):
    mpdir = Path(worker_env["PROMETHEUS_MULTIPROC_DIR"])
    env = dict(worker_env, COREVO_COMPACT_AT_EXIT="8")
    scraper = subprocess.Popen(
        helper_cmd("mp_scraper.py", "--interval", "0.05", "--janitor", "0.2"), env=env,
        text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )
    try:
        assert scraper.stdout is not None
        json.loads(scraper.stdout.readline())
        churn = subprocess.run(
            helper_cmd("mp_churn.py", "--total", str(TOTAL), "--batch", str(BATCH),
                       "--kill-every", str(KILL_EVERY), "--inc", str(INC)),
            env=env, capture_output=True, text=True, timeout=240,
        )
        assert churn.returncode == 0, churn.stderr
        done = json.loads(churn.stdout.strip().splitlines()[-1])
        out, _ = scraper.communicate("\n", timeout=60)
    finally:
        scraper.kill()
    report = json.loads(out.strip().splitlines()[-1])
    (mpdir.parent / "churn-report.json").write_text(json.dumps(report))  # for a look after
    assert done["children"] == TOTAL and done["killed"] == TOTAL // KILL_EVERY

    # another process scraped at >= 10/s the whole time, and nothing ever went backwards
    assert report["scrapes"] / report["seconds"] >= 10, report["scrapes"]
    assert report["decreases"] == []
    assert scan(mpdir).stats.compactions >= 10

    # files stayed bounded: live writers x types + a constant (accumulators, and the dead
    # of up to four batches awaiting the next compaction: on a loaded CI box the janitor
    # fell ~3 batches behind, 383 files) -- without compaction: 4,000+, growing with TOTAL
    live_max = BATCH + 1
    bound = live_max * TYPES + 4 * BATCH * TYPES + 3
    assert max(report["db_files"]) <= bound, (max(report["db_files"]), bound)

    # the scrape's own cost did not grow with the dead writers (CPU; wall includes waits)
    cpu = report["collect_cpu_s"]
    q = len(cpu) // 4
    early, late = statistics.median(cpu[:q]), statistics.median(cpu[-q:])
    assert late < 3 * early + 0.002, (early, late)

    # the end: every increment is there exactly once
    compact(mpdir)
    reg = CollectorRegistry()
    LockedMultiProcessCollector(reg, path=str(mpdir))
    events = sum(
        reg.get_sample_value("mpt_events_total", {"kind": k}) or 0 for k in ("odd", "even")
    )
    assert events == done["increments"] == TOTAL * INC
    assert reg.get_sample_value("mpt_latency_seconds_count") == TOTAL * INC
    assert reg.get_sample_value("mpt_latency_seconds_bucket", {"le": "0.5"}) == TOTAL * INC
    assert reg.get_sample_value("mpt_latency_seconds_sum") == 0.25 * TOTAL * INC
    assert reg.get_sample_value("mpt_peak") == TOTAL  # max survives compaction
    assert not reg.get_sample_value("mpt_busy")  # livesum: nobody is alive
    assert sorted(f.path.name for f in metric_files(mpdir)) == [
        "counter_compacted.db", "gauge_max_compacted.db", "histogram_compacted.db",
    ]
