"""Independent checkers of a fault-schedule run (fault_run.py's ``Outcome``).

Each promise is checked from the records the load wrote itself — holders' grant →
end-of-work lines, lanes' win / side-effect / finish lines, the producer's creates and
cancels, the exit status of every process — never from the lease store's rows. The job
table is read only for "every job terminal or recoverable" and the metrics directory
only to compare the counters with what the load caused.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from corevo_obs.core.promclient import SPACE_RETRY_SECONDS
from tests.helpers.fault_run import REFUSED_RC, Applied, Incarnation, Outcome
from tests.helpers.lease_tracker import Span, max_overlap, read_spans

TERMINAL = ("completed", "cancelled", "lost", "failed", "timeout")
KILLED = -9


@dataclass
class Check:
    name: str
    ok: bool
    figure: str


@dataclass
class JobRecords:
    """What the lanes of every incarnation wrote: wins, side effects, finishes."""
    wins: list[tuple[float, str, str, int]]          # (t, label, job, epoch)
    effects: dict[str, list[tuple[str, str, bool]]]  # job -> [(label, execution, readback)]
    finished: Counter[str]                           # label -> finishes
    started: Counter[str]                            # label -> starts the store counted
    ready: dict[str, float]                          # label -> when it was ready


def _jobs(incs: list[Incarnation]) -> JobRecords:
    rec = JobRecords([], defaultdict(list), Counter(), Counter(), {})
    for inc in incs:
        if not inc.jobs.exists():
            continue
        for line in inc.jobs.read_text().splitlines():
            f = line.split()
            if f[0] == "W":
                rec.wins.append((float(f[-1]), inc.label, f[1], int(f[2])))
            elif f[0] == "S":
                readback = len(f) == 5
                rec.effects[f[1]].append((inc.label, f[2], readback))
                rec.started[inc.label] += not readback
            elif f[0] == "F":
                rec.finished[inc.label] += 1
            elif f[0] == "R":
                rec.ready[inc.label] = float(f[1])
    rec.wins.sort()
    return rec


def _producer(log: Path) -> tuple[set[str], set[str], set[str]]:
    created: set[str] = set()
    maybe: set[str] = set()
    cancelled: set[str] = set()
    for line in log.read_text().splitlines() if log.exists() else []:
        kind, job = line.split()[:2]
        {"C": created, "M": maybe, "K": cancelled}[kind].add(job)
    return created, maybe, cancelled


def _died(inc: Incarnation) -> float | None:
    return inc.killed if inc.killed is not None else (inc.ended if inc.rc else None)


def _spans(o: Outcome) -> tuple[list[Span], dict[str, list[Span]], list[str]]:
    spans: list[Span] = []
    by_label: dict[str, list[Span]] = {}
    unfinished: list[str] = []
    for inc in o.incarnations:
        mine, open_ = read_spans([inc.track], died=_died(inc))
        by_label[inc.label] = mine
        spans += mine
        unfinished += [f"{inc.label}:{h}" for h in open_]
    return spans, by_label, unfinished


def _first_after(times: list[float], t: float) -> float | None:
    later = [x for x in times if x > t]
    return min(later) - t if later else None


def recoveries(o: Outcome) -> list[tuple[Applied, float | None]]:
    """Per applied fault: seconds from its end to the next success of the operation it
    broke (a grant after a Redis fault, a claim won after a PostgreSQL stop, the slot's
    next incarnation at work after a worker kill, both after the others)."""
    spans, by_label, _ = _spans(o)
    grants = [a for a, _ in spans]
    wins = [w[0] for w in _jobs(o.incarnations).wins]
    out: list[tuple[Applied, float | None]] = []
    for a in o.applied:
        kind = a.fault.kind
        r: float | None
        if kind.startswith("redis"):
            r = _first_after(grants, a.ended)
        elif kind == "pg-stop":
            r = _first_after(wins, a.ended)
        elif kind == "worker-kill":   # under gunicorn: any worker the master started next
            slot = "g" if a.note.startswith("g") else f"w{a.fault.target}"
            nxt = [i for i in o.incarnations if i.slot == slot and i.started > a.began]
            ops = [t for i in nxt for t in [s for s, _ in by_label[i.label]] +
                   [w[0] for w in _jobs([i]).wins]]
            r = _first_after(ops, a.began)
        else:
            g, w = _first_after(grants, a.ended), _first_after(wins, a.ended)
            r = None if g is None or w is None else max(g, w)
        out.append((a, r))
    return out


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def check(o: Outcome) -> list[Check]:
    s = o.settings
    checks: list[Check] = []
    spans, _, unfinished = _spans(o)
    # 1. work-level oversell, from the holders' own intervals
    worst = max_overlap(spans)
    checks.append(Check("work-level oversell", worst <= s.limit and len(spans) > 0,
                        f"max {worst} of {s.limit} at work over {len(spans)} intervals"))
    checks.append(Check("the limit was reached (the run is not vacuous)", worst >= s.limit,
                        f"{worst} of {s.limit}"))
    early = [a - r for r in o.restarts for a, _ in spans if r < a < r + s.timeout]
    checks.append(Check("no grant within one timeout of an empty restart", not early,
                        f"{len(o.restarts)} restarts, {len(early)} early grants"))
    checks.append(Check("every holder of a live process wrote its end of work",
                        not unfinished, f"{len(unfinished)} open: {unfinished[:3]}"))
    # 2. claims: won twice, executed twice, cancelled yet executed
    jobs = _jobs(o.incarnations)
    by_epoch = Counter((job, epoch) for _, _, job, epoch in jobs.wins)
    twice_won = [k for k, n in by_epoch.items() if n > 1]
    twice_run = [j for j, e in jobs.effects.items() if len({x[1] for x in e}) > 1]
    checks.append(Check("0 jobs won twice (one epoch, two winners)", not twice_won,
                        f"{len(twice_won)} won twice of {len(by_epoch)} claims won"))
    checks.append(Check("0 jobs executed twice", not twice_run,
                        f"{len(twice_run)} executed twice of {len(jobs.effects)} executed jobs"
                        + (f": {twice_run[:3]}" if twice_run else "")))
    created, maybe, cancelled = _producer(o.producer_log)
    cancelled_run = sorted(cancelled & set(jobs.effects))
    checks.append(Check("0 cancelled jobs executed", not cancelled_run,
                        f"{len(cancelled_run)} executed of {len(cancelled)} cancelled"))
    # 3. no job lost: every created job terminal or recoverable (queued, ownerless)
    all_jobs = created | (maybe & set(o.jobs))
    missing = sorted(all_jobs - set(o.jobs))
    stuck = sorted(j for j in all_jobs & set(o.jobs) if o.jobs[j][0] not in TERMINAL
                   and not (o.jobs[j][0] == "queued" and o.jobs[j][1] is None))
    states = Counter(o.jobs[j][0] for j in all_jobs & set(o.jobs))
    dead = {i.label for i in o.incarnations if _died(i) is not None}
    # a lost job's owner (its store's owner id starts with the worker label) died
    bad_lost = sorted(j for j in all_jobs & set(o.jobs) if o.jobs[j][0] == "lost"
                      and str(o.jobs[j][1]).split("@")[0] not in dead)
    not_cancelled = sorted(j for j in cancelled if o.jobs.get(j, ("",))[0] != "cancelled")
    checks.append(Check("0 jobs lost (each terminal or recoverable)",
                        not missing and not stuck and bad_lost == [] and not not_cancelled,
                        f"{len(all_jobs)} jobs: {dict(states)}; missing {len(missing)}, "
                        f"stuck {len(stuck)} {stuck[:3]}, 'lost' without a dead executor "
                        f"{len(bad_lost)}, cancels not kept {len(not_cancelled)}"))
    unexecuted = sorted(j for j in all_jobs & set(o.jobs)
                        if o.jobs[j][0] == "completed" and j not in jobs.effects)
    checks.append(Check("every completed job was executed by a lane", not unexecuted,
                        f"{len(unexecuted)} completed without a side effect"))
    # 4. counters: never backwards across scrapes, equal to what the load caused
    sc = o.scraper
    checks.append(Check("counters never go backwards across scrapes",
                        sc.get("scrapes", 0) > 0 and not sc.get("decreases"),
                        f"{sc.get('scrapes', 0)} scrapes, {len(sc.get('decreases', []))} "
                        f"decreases {sc.get('decreases', [])[:2]}, "
                        f"{sc.get('failed', 0)} failed"))
    checks += _counter_checks(o, jobs, spans)
    checks.append(plain_reader_check(o))
    # 5. no host process crashed by the suite
    crashed = [f"{i.label} rc {i.rc}" for i in o.incarnations
               if not (i.rc == 0 or (i.rc == KILLED and i.killed is not None)
                       or i.rc == REFUSED_RC)]
    refused = sum(i.rc == REFUSED_RC for i in o.incarnations)
    others = [f"{n} rc {rc}" for n, rc in (("producer", o.producer_rc),
                                           ("scraper", o.scraper_rc)) if rc != 0]
    checks.append(Check("no host process crashed", not crashed and not others and
                        not o.crashes,
                        f"{len(o.incarnations)} worker processes, "
                        f"{sum(i.killed is not None for i in o.incarnations)} SIGKILLed by "
                        f"the nemesis, {refused} refused to start on the full disk; "
                        f"crashed: {crashed + others + o.crashes}"))
    checks.append(Check("the queue drained after the schedule", o.drained,
                        "yes" if o.drained else "no"))
    # 6. recovery after every fault
    rec = recoveries(o)
    never = [str(a.fault) for a, r in rec if r is None]
    checks.append(Check("every fault recovered", not never,
                        f"{len(rec)} faults, not recovered: {never[:3]}"))
    return checks


#: a value file held in memory (no room) is written out within this long after room is
#: back (promclient's retry thread, every SPACE_RETRY_SECONDS) on a loaded machine
HELD_GRACE = SPACE_RETRY_SECONDS + 2.0
NO_ROOM = "no room to grow a metric value file"


def _pid(inc: Incarnation) -> int | None:
    if inc.proc is not None:
        return inc.proc.pid
    return int(inc.label[1:]) if inc.label[1:].isdigit() else None


def no_room_windows(o: Outcome) -> list[tuple[float, float]]:
    """When the metrics disk was full, from its filling to room back plus ``HELD_GRACE``."""
    return [(a.began, a.ended + HELD_GRACE) for a in o.applied
            if a.fault.kind in ("disk-full", "disk-full-start") and a.note[:2] != "0 "
            and " 0 bytes" not in a.note]


def held_at_death(o: Outcome, inc: Incarnation) -> str | None:
    """Why ``inc``'s counters may be short of its records: it logged that a value file of
    its pid had no room (its values were in its memory) and it died while the disk was
    full or before the retry could write them out; None when its records show no such
    thing. A process killed then (or exiting while the disk is full) has nowhere its
    counts could have been kept."""
    died, pid = _died(inc) or inc.ended, _pid(inc)
    if died is None or pid is None or not inc.log.exists():
        return None
    said = [line for line in inc.log.read_text(errors="replace").splitlines()
            if NO_ROOM in line and f"_{pid}.db" in line]
    windows = [(b, e) for b, e in no_room_windows(o) if b <= died <= e]
    if not said or not windows:
        return None
    b, e = windows[0]
    return (f"{inc.label} died at {died - o.t0:.2f} s with its values in memory (logged "
            f"'{NO_ROOM}' for its pid; disk full {b - o.t0:.2f}-{e - HELD_GRACE - o.t0:.2f} s)")


def life(o: Outcome, inc: Incarnation) -> str:
    """The records of one incarnation that a counter verdict rests on."""
    died = _died(inc) or inc.ended
    lines = inc.jobs.read_text().splitlines() if inc.jobs.exists() else []
    times = [float(x.split()[-1]) for x in lines if x[:1] in "WSF"]
    grants = [a for a, _ in read_spans([inc.track], died=died)[0]]
    around = [f"{a.fault.kind} {a.began - o.t0:.2f}-{a.ended - o.t0:.2f} s" for a in o.applied
              if died is not None and a.began - 1.0 <= died <= a.ended + HELD_GRACE]
    pid = _pid(inc)
    logged = [x.strip()[:160] for x in (inc.log.read_text(errors="replace").splitlines()
                                        if inc.log.exists() else [])
              if pid is not None and str(pid) in x and ("corevo-obs" in x or "Worker" in x)]

    def t(x: float | None) -> str:
        return "-" if x is None else f"{x - o.t0:.2f} s"

    span = f"{t(min(times))}-{t(max(times))}" if times else "none"
    how = "killed" if inc.killed is not None else "ended"
    return (f"{inc.label}: started {t(inc.started)}, {how} {t(died)} (rc {inc.rc}); "
            f"{len(grants)} grants, {len(lines)} job lines {span}; faults around its "
            f"death: {around}; its log: {logged[:3]}")


def _counter_checks(o: Outcome, jobs: JobRecords, spans: list[Span]) -> list[Check]:
    c, p, s = o.counters, o.producer, o.settings

    def val(metric: str, worker: str, kind: str) -> int:
        return round(c.get((metric, worker, kind), 0.0))

    wrong: list[str] = []
    evidence: list[str] = []
    excused: dict[str, str] = {}
    exact = p.get("recover_errors", 0) == 0
    for metric, kind, tally in (("corevo_job_dispatch_path_total", "queued", "created"),
                                ("corevo_job_terminal_total", "cancelled", "cancelled"),
                                ("corevo_claim_reclaimed_total", "", "reclaimed"),
                                ("corevo_job_terminal_total", "lost", "marked_lost")):
        got, want = val(metric, "producer", kind), p.get(tally, 0)
        if got != want and not (tally in ("reclaimed", "marked_lost") and not exact
                                and got >= want):
            wrong.append(f"producer {metric}{{{kind}}} {got} != {want}")
    compared = 0
    for inc in o.incarnations:
        if inc.rc == REFUSED_RC:
            continue
        grants = len(read_spans([inc.track], died=_died(inc))[0])
        held = held_at_death(o, inc)
        for metric, kind, want, slack in (
                ("corevo_lease_acquire_total", "granted", grants, s.holders),
                ("corevo_claim_start_total", "started", jobs.started[inc.label], s.lanes),
                ("corevo_job_terminal_total", "completed", jobs.finished[inc.label],
                 s.lanes)):
            got = val(metric, inc.label, kind)
            compared += 1
            # a SIGKILL may land between the store counting and the line being written
            ok = got == want if inc.rc == 0 else want <= got <= want + slack
            if not ok and held is not None and got <= want + (slack if inc.rc else 0):
                excused[inc.label] = f"{held}: {metric}{{{kind}}} {got} of {want}"
                continue
            if not ok:
                wrong.append(f"{inc.label} (rc {inc.rc}) {metric}{{{kind}}} {got}, "
                             f"its records say {want}")
                if len(evidence) < 3 and not any(e.startswith(inc.label + ":")
                                                 for e in evidence):
                    evidence.append(life(o, inc))
    total_grants = sum(v for (m, _, k), v in c.items()
                       if m == "corevo_lease_acquire_total" and k == "granted")
    return [Check("counters equal what the load caused", not wrong,
                  f"{compared + 4} counters compared (producer exact, each worker exact "
                  f"or within a SIGKILL's window); {round(total_grants)} grants counted for "
                  f"{len(spans)} intervals; {len(excused)} died (killed, or exited) with "
                  f"values held in memory on the full disk (short: nowhere to keep them)"
                  + (f" {list(excused.values())[:2]}" if excused else "")
                  + f"; wrong: {wrong[:3]}" + (f"; records: {evidence}" if evidence else ""))]


def plain_reader_check(o: Outcome) -> Check:
    """An unmodified ``MultiProcessCollector`` (what the client_python gunicorn recipe
    runs) reads every file the suite leaves: no scrape fails but for a dead writer's file
    removed by a compaction between its glob and its read (its known race, not ours), and
    at the end it reads exactly what the suite's locked reader reads."""
    pl = o.plain
    types = dict(pl.get("error_types", {}))
    raced = types.pop("FileNotFoundError", 0)
    same = o.plain_counters == o.counters
    diff = sorted(k for k in set(o.counters) | set(o.plain_counters or {})
                  if (o.plain_counters or {}).get(k) != o.counters.get(k))
    return Check("a plain MultiProcessCollector reads every file",
                 pl.get("scrapes", 0) > 0 and not types and same,
                 f"{pl.get('scrapes', 0)} plain scrapes, failed: {types or 0} (+{raced} "
                 f"raced a compaction's removal); at the end "
                 + ("the same counters as the locked reader" if same else
                    f"{len(diff)} counters differ from the locked reader: {diff[:3]}")
                 + (f"; errors {pl.get('errors', [])[:2]}" if types else ""))


def replacement_ready(o: Outcome) -> list[float]:
    """Per worker kill: seconds until the slot's next incarnation was ready (its start-up
    alone, part of the kill's recovery)."""
    ready = _jobs(o.incarnations).ready
    out = []
    for a in o.applied:
        if a.fault.kind == "worker-kill" and a.note[:1] in ("w", "g"):
            slot = "g" if a.note.startswith("g") else f"w{a.fault.target}"
            nxt = [i for i in o.incarnations if i.slot == slot
                   and i.started > a.began and i.label in ready]
            if nxt:   # the first one ready (under gunicorn: any worker started after)
                out.append(min(ready[i.label] for i in nxt) - a.began)
    return out


def recovery_table(o: Outcome) -> list[str]:
    by_kind: dict[str, list[float]] = defaultdict(list)
    count: Counter[str] = Counter()
    for a, r in recoveries(o):
        count[a.fault.kind] += 1
        if r is not None:
            by_kind[a.fault.kind].append(r)
    rows = ["| fault | injected | recovery p50 | p99 | max |", "|---|---|---|---|---|"]
    for kind in sorted(count):
        xs = by_kind[kind]
        if xs:
            rows.append(f"| {kind} | {count[kind]} | {statistics.median(xs):.2f} s | "
                        f"{_pct(xs, 0.99):.2f} s | {max(xs):.2f} s |")
        else:
            rows.append(f"| {kind} | {count[kind]} | — | — | — |")
    starts = replacement_ready(o)
    if starts:
        rows.append(f"\nworker kills: the replacement was ready (start-up) p50 "
                    f"{statistics.median(starts):.2f} s, p99 {_pct(starts, 0.99):.2f} s "
                    "after the kill; the recovery above runs to its first grant or claim")
    return rows


def report(o: Outcome, checks: list[Check]) -> str:
    """The table printed after every run: checkers, then faults and their recovery."""
    lines = ["| checker | result | figure |", "|---|---|---|"]
    lines += [f"| {ck.name} | {'ok' if ck.ok else 'FAILED'} | {ck.figure} |"
              for ck in checks]
    late = max(o.applied, key=lambda a: a.began - a.fault.at, default=None)
    if late is not None:   # a nemesis held up by one fault delays the ones behind it
        lines.append(f"\nthe nemesis applied each fault at most "
                     f"{late.began - o.t0 - late.fault.at:.2f} s after its time ({late.fault})")
    if o.settings.redis_save:
        lines.append(f"\nredis with save rules '{o.settings.redis_save}': "
                     f"{len(o.snapshots)} BGSAVEs, {len(o.restarts)} restarts from the last one")
    return "\n".join([*lines, "", *recovery_table(o)])
