"""A seeded schedule of overlapping faults against a running workload, with checkers.

Jepsen's model, on real parts: a nemesis (tests/helpers/fault_plan.py, fault_run.py)
SIGKILLs and restarts a redis-server, SIGSTOPs it, stops PostgreSQL immediately,
SIGKILLs app workers under gunicorn, runs a CPU hog, starts clients whose clocks run 10 s ahead and
fills the metrics tmpfs — while workers hold leases, claim and run jobs, a producer
creates and cancels jobs and a scraper reads the metrics. Independent checkers
(fault_checks.py) then judge the promises from the records the load wrote itself. The
seed reproduces the schedule; a failure prints it with the checkers' table.
``bench/fault_schedule.py`` runs the same code for minutes.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _need
from tests.helpers.fault_checks import HELD_GRACE, NO_ROOM, check, report
from tests.helpers.fault_plan import KINDS, Fault, describe, generate
from tests.helpers.fault_run import PACKAGED_SAVE, Applied, Incarnation, Outcome, Settings, run

SEED, SECONDS = 14, 100.0
#: every kind, the full metrics disk included (value files get their space before a page
#: is touched: no writer, janitor or scraper dies of SIGBUS)
KINDS_NOW = tuple(KINDS)


def test_the_schedule_is_a_function_of_its_seed() -> None:
    first = generate(SEED, SECONDS)
    assert first == generate(SEED, SECONDS)
    assert first != generate(SEED + 1, SECONDS)
    assert {f.kind for f in first} == set(KINDS)       # the seed meets every kind
    for timeline in {t for t, *_ in KINDS.values()}:   # one fault at a time per thing
        mine = [f for f in first if KINDS[f.kind][0] == timeline]
        assert all(a.end < b.at for a, b in zip(mine, mine[1:], strict=False)), timeline
    assert all(5.0 <= f.at and f.end <= SECONDS - 10.0 for f in first)
    with pytest.raises(ValueError, match="unknown fault kinds"):
        generate(SEED, SECONDS, kinds=("redis-kill", "meteor"))


def _run_and_check(tmp: Path, seed: int, seconds: float, kinds: tuple[str, ...], *,
                   gunicorn: bool = False, redis_save: str = "") -> Outcome:
    faults = generate(seed, seconds, kinds=kinds)
    outcome = run(Settings(seconds, seed, gunicorn=gunicorn, redis_save=redis_save), faults,
                  tmp)
    checks = check(outcome)
    table = report(outcome, checks)
    print(f"\n{describe(seed, faults)}\n{table}")
    failed = [c for c in checks if not c.ok]
    assert not failed, (f"{len(failed)} checkers failed; replay with `bench/fault_schedule.py "
                        f"--seconds {seconds:g} --seed {seed} --kinds {','.join(kinds)}"
                        f"{' --gunicorn' if gunicorn else ''}"
                        f"{' --redis-save packaged' if redis_save else ''}`\n"
                        f"{describe(seed, faults)}\n{table}")
    return outcome


@pytest.mark.timeout(420)   # ≈ 120 s here; the schedule is 100 s, the rest is start and drain
def test_a_seeded_fault_schedule_keeps_every_promise(tmp_path: Path) -> None:
    """The app workers run under a gunicorn master (it restarts the killed ones); the
    clock-ahead workers are plain processes beside them."""
    outcome = _run_and_check(tmp_path, SEED, SECONDS, KINDS_NOW, gunicorn=True)
    assert {a.fault.kind for a in outcome.applied} == set(KINDS_NOW)
    killed = [a.note for a in outcome.applied
              if a.fault.kind in ("worker-kill", "disk-full-start")]
    assert all(k.startswith("g") for k in killed), killed   # gunicorn workers were killed
    said = (tmp_path / "records" / "gunicorn.log").read_text(errors="replace")
    assert said.count("Booting worker") == outcome.settings.workers + len(killed), \
        "the master did not replace each killed worker once"


@pytest.mark.system
@pytest.mark.timeout(300)   # ≈ 55 s here
def test_the_schedule_with_redis_persistence_as_shipped(tmp_path: Path) -> None:
    """Redis as Debian ships it: redis.conf's save rules, and a BGSAVE every few seconds
    (the shipped rules alone would not snapshot within the run), so each SIGKILL lands
    between snapshots and each restart loads the last one; with the other faults aimed
    at what a restart could lose: workers killed, one booted on a full metrics disk.

    Before the run-id fence it granted within one timeout of each restart (11 in 2
    restarts). Its one failure on the fence was the nemesis' own: a BGSAVE sent to the
    SIGSTOPped server held it 7 s (redis-py's retries) and the boot wait of the full disk
    held it more, so the 4.4 s stop ended 1 s before the schedule did and "every fault
    recovered" had no grant to find (1 of 6 runs under 2 busy loops)."""
    outcome = _run_and_check(tmp_path, 10, 45.0, ("redis-kill", "redis-stop", "worker-kill",
                                                  "disk-full-start"),
                             gunicorn=True, redis_save=PACKAGED_SAVE)
    assert len(outcome.restarts) == 2 and len(outcome.snapshots) >= 5, outcome.snapshots
    assert (tmp_path / "dump.rdb").exists()   # the restarts had a snapshot to load


@pytest.mark.timeout(300)
def test_a_full_metrics_disk_crashes_no_process(tmp_path: Path) -> None:
    outcome = _run_and_check(tmp_path, 4, 40.0, ("disk-full", "worker-kill"))
    if not outcome.disk:
        _need("no tmpfs could be mounted for the disk-full faults (needs root)")
    assert any(a.fault.kind == "disk-full" and a.note.split()[0] != "0"
               for a in outcome.applied), "the disk was never filled"


# --- the checkers can fail: one planted violation each, on records written by hand -------

def _records(tmp: Path, **plant: Any) -> Outcome:
    """A clean two-holder, one-job run (limit 2), with ``plant`` changing one thing."""
    tracks = {"w0-1": ["E h1 1.0 0.5", "X h1 2.0", "E h2 1.5 0.5", "X h2 3.0",
                       *plant.get("track", [])]}
    lines = {"w0-1": ["W j1 1 1.1", "S j1 w0-1.x 1.2", "F j1 1.3"], **plant.get("jobs", {})}
    incs = []
    for label in sorted(set(tracks) | set(lines)):
        (tmp / f"{label}.track").write_text("".join(f"{x}\n" for x in tracks.get(label, [])))
        (tmp / f"{label}.jobs").write_text("".join(f"{x}\n" for x in lines.get(label, [])))
        proc = subprocess.Popen(["true"], text=True)
        proc.wait()
        (tmp / f"{label}.log").write_text(plant.get("log", {}).get(label, "").format(
            pid=proc.pid))
        incs.append(Incarnation(label, label.split("-")[0], 0.0, tmp / f"{label}.track",
                                tmp / f"{label}.jobs", tmp / f"{label}.log", proc, 0.5,
                                4.0, plant.get("rc", {}).get(label, 0),
                                plant.get("killed", {}).get(label)))
    (tmp / "producer.log").write_text("C j1 1.0\n")
    counters = {("corevo_job_dispatch_path_total", "producer", "queued"): 1.0,
                ("corevo_lease_acquire_total", "w0-1", "granted"): 2.0,
                ("corevo_claim_start_total", "w0-1", "started"): 1.0,
                ("corevo_job_terminal_total", "w0-1", "completed"): 1.0,
                **plant.get("counters", {})}
    plain = plant.get("plain", {"scrapes": 3, "error_types": {"FileNotFoundError": 1}})
    return Outcome(Settings(10.0, 0, limit=2), 0.0, plant.get("applied", []), incs, [],
                   tmp / "producer.log", {"created": 1}, 0,
                   {"scrapes": 3, "decreases": plant.get("decreases", [])}, 0,
                   plant.get("rows", {"j1": ("completed", "w0-1@x", "w0-1.x")}),
                   counters, [], True, True, plain,
                   {**counters, **plant.get("plain_counters", {})})


def _failed(tmp: Path, **plant: Any) -> set[str]:
    return {c.name for c in check(_records(tmp, **plant)) if not c.ok}


def test_each_checker_fails_on_its_planted_violation(tmp_path: Path) -> None:
    assert _failed(tmp_path) == set()
    assert _failed(tmp_path, track=["E h3 1.8 0.5", "X h3 1.9"],
                   counters={("corevo_lease_acquire_total", "w0-1", "granted"): 3.0}
                   ) == {"work-level oversell"}
    assert _failed(tmp_path, jobs={"w1-2": ["W j1 2 2.0", "S j1 w1-2.y 2.1", "F j1 2.2"]},
                   counters={("corevo_claim_start_total", "w1-2", "started"): 1.0,
                             ("corevo_job_terminal_total", "w1-2", "completed"): 1.0}
                   ) == {"0 jobs executed twice"}
    assert _failed(tmp_path, jobs={"w1-2": ["W j1 1 1.15"]}) == {
        "0 jobs won twice (one epoch, two winners)"}
    assert _failed(tmp_path, rows={"j1": ("running", "w0-1@x", "w0-1.x")}) == {
        "0 jobs lost (each terminal or recoverable)"}
    assert _failed(tmp_path, rows={}) == {"0 jobs lost (each terminal or recoverable)"}
    assert _failed(tmp_path, counters={("corevo_claim_start_total", "w0-1", "started"): 2.0}
                   ) == {"counters equal what the load caused"}
    assert _failed(tmp_path, decreases=["x_total: 2 -> 1"]) == {
        "counters never go backwards across scrapes"}
    assert _failed(tmp_path, rc={"w0-1": -7}) == {"no host process crashed"}
    assert _failed(tmp_path, plain={"scrapes": 3, "error_types": {"error": 2}}) == {
        "a plain MultiProcessCollector reads every file"}   # struct.error on a 0-byte file
    assert _failed(tmp_path, plain_counters={("corevo_claim_start_total", "w0-1", "started"):
                                             0.0}) == {
        "a plain MultiProcessCollector reads every file"}
    # a worker SIGKILLed on the full disk with its values in memory: short counters are
    # excused only when its log says its file had no room and it died while the disk was
    # full (or before the retry could write them out); otherwise they are lost counts
    short = {("corevo_claim_start_total", "w0-1", "started"): 0.0,
             ("corevo_job_terminal_total", "w0-1", "completed"): 0.0}
    full = Applied(Fault("disk-full", 0.5, 0.3), 0.5, 0.8, "4096 bytes")
    said = {"w0-1": f"corevo-obs metrics-space failed (OSError: [Errno 28] {NO_ROOM}: "
                    "'/m/counter_{pid}.db')\n"}
    killed = dict(rc={"w0-1": -9}, killed={"w0-1": 0.7}, counters=short)
    assert _failed(tmp_path, applied=[full], log=said, **killed) == set()
    assert _failed(tmp_path, applied=[full], **killed) == {
        "counters equal what the load caused"}
    assert _failed(tmp_path, log=said, **killed) == {"counters equal what the load caused"}
    late = dict(killed, killed={"w0-1": 0.8 + HELD_GRACE + 0.5})
    assert _failed(tmp_path, applied=[full], log=said, **late) == {
        "counters equal what the load caused"}
    figure = {c.name: c.figure for c in check(_records(tmp_path, applied=[full], **killed))}
    said_why = figure["counters equal what the load caused"]
    assert "records: " in said_why and "w0-1: started" in said_why and "disk-full" in said_why
