"""One load-test run, start to end: upstream, app, scraper, driver, kill, verdicts, report.

Order matters for what the numbers mean: the app is ready (every worker has beaten)
before the idle baseline starts; the load phase is bracketed by two full scrapes whose
difference is the run's histograms and counters; the kill happens at its offset in the
load phase and the driver keeps going while the server replaces the worker.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import observe
from .driver import Driver
from .loopback import check_loopback
from .report import write_report
from .server import LogTail, Target, serve_app
from .upstream import start_upstream
from .verdicts import Observations, Verdict, judge
from .workload import Workload, WorkloadError

CLAIM_SERIES = observe.CLAIM_SERIES

REPLACE_WAIT = 20.0
RUN_DIR_ENV = "COREVO_LOADTEST_DIR"
SETTLE_POLL = 0.25


@dataclass
class RunResult:
    verdicts: list[Verdict]
    report: dict[str, Any]
    html: Path
    json: Path

    @property
    def failed(self) -> bool:
        return any(v.failed for v in self.verdicts)


def run_loadtest(app: str, workload: Workload, *, workers: int, out_dir: Path,
                 metrics_url: str | None = None, server_log: Path | None = None) -> RunResult:
    t0 = time.monotonic()

    def clock() -> float:
        return time.monotonic() - t0

    out_dir.mkdir(parents=True, exist_ok=True)
    is_url = "://" in app
    if is_url:
        base = check_loopback(app, "APP")
        metrics = check_loopback(metrics_url or base + "/metrics", "--metrics-url")
    elif metrics_url:
        raise WorkloadError("only with a URL (the tool serves an import path's metrics)",
                            source="--metrics-url")
    if not is_url and workers < 2 and workload.kill_worker_at_seconds is not None:
        raise WorkloadError("the workload kills a worker mid-run (kill_worker_at_seconds): "
                            "serve 2 or more", source="--workers")
    upstream = start_upstream(workload.upstream, out_dir / "upstream.log")
    target: Target | None = None
    scraper: observe.Scraper | None = None
    try:
        env = dict(os.environ)
        env[workload.upstream.env] = upstream.url
        env[workload.upstream.stream_env] = upstream.stream_url
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (os.getcwd(), env.get("PYTHONPATH", "")) if p)
        env[RUN_DIR_ENV] = str(out_dir.resolve())  # where the app may keep this run's state
        if is_url:
            target = Target(base, metrics, served=False)
            _check_metrics(metrics)
            if server_log is not None:
                target.log = _follow(server_log, out_dir, clock)
        else:
            target = serve_app(app, workers=workers, env=env, out_dir=out_dir, clock=clock)
        scraper = observe.Scraper(target.metrics_url, clock).start()
        scraper.mark("baseline")
        tgt = target

        async def on_phase(name: str) -> None:
            await asyncio.to_thread(scraper.mark, name)

        async def kill() -> dict[str, Any]:
            return await asyncio.to_thread(_kill_one, tgt, clock, workload.seed)

        driver = Driver(workload, target.base_url, clock=clock,
                        kill=kill if target.served else _no_kill, on_phase=on_phase)
        result = asyncio.run(driver.run())
        scraper.mark("end")
        _settle(scraper, workload.settle_seconds)
        scraper.close()
        if not target.served and target.log is not None:
            time.sleep(0.3)  # the last lines the app wrote
            target.log.join()
        # a stall still going on when the run ends counts with its age so far
        stalls = [*target.log.stalls, *target.log.ongoing.values()] if target.log else []
        load_stalls = [s for s in stalls if s.at >= result.load_start - 0.5]
        obs = _observations(scraper, result, load_stalls, upstream.stats(),
                            stalls_logged=target.log is not None)
        verdicts = judge(workload, obs)
        from .report import build_report

        report = build_report(app=app, workload=workload, target=target, scraper=scraper,
                              driver=result, stalls=stalls, verdicts=verdicts,
                              workers=workers, upstream_url=upstream.url)
        html, js = write_report(report, out_dir)
        return RunResult(verdicts, report, html, js)
    finally:
        if scraper is not None:
            scraper.close()
        if target is not None and target.served:
            target.close()
            if target.mp_dir is not None:
                shutil.rmtree(target.mp_dir, ignore_errors=True)
        upstream.close()


async def _no_kill() -> dict[str, Any]:
    return {"reason": "the app is not served by the tool (a URL): no worker to kill"}


def _check_metrics(url: str) -> None:
    try:
        samples = observe.fetch(url)
    except (OSError, ValueError) as exc:
        raise WorkloadError(f"cannot read metrics: {exc}", source=url) from None
    if not observe.present(samples, [f"{observe.LAG}_bucket"]):
        raise WorkloadError(f"no {observe.LAG} there (is install_loop_health running in "
                            "the app, and is this its metrics endpoint?)", source=url)


def _follow(path: Path, out_dir: Path, clock: Any) -> LogTail:
    """Tail the running app's log from its current end (older stalls are not this run's)."""
    try:
        stream = open(path, "rb")  # noqa: SIM115 - closed with the tail's thread
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            stream.close()
            raise WorkloadError("not a regular file", source=f"--server-log {path}")
        stream.seek(0, os.SEEK_END)
    except OSError as exc:
        raise WorkloadError(exc.strerror or str(exc), source=f"--server-log {path}") from None
    return LogTail(stream, out_dir / "server.log", clock, follow=True)


def _kill_one(target: Target, clock: Any, seed: int) -> dict[str, Any]:
    """SIGKILL one worker (chosen by the seed), then wait for the server to replace it."""
    pids = target.worker_pids()
    if not pids:
        return {"reason": "no worker process found to kill"}
    victim = pids[seed % len(pids)]
    worker = target.worker_of(victim)
    at = clock()
    try:
        os.kill(victim, signal.SIGKILL)
    except ProcessLookupError:
        return {"reason": f"worker pid {victim} was already gone"}
    info: dict[str, Any] = {"at": round(at, 3), "killed_pid": victim, "worker": worker,
                            "signal": "SIGKILL", "replaced_after_seconds": None}
    claims = target.claims_of(victim)  # its files are final now, and not yet compacted
    if claims is not None:
        info["left_running"] = int(max(0.0, claims["started"] - claims["terminal"]))
    deadline = time.monotonic() + REPLACE_WAIT
    while time.monotonic() < deadline:
        now = target.worker_pids()
        fresh = [p for p in now if p not in pids]
        if victim not in now and len(now) >= len(pids) and fresh:
            new_worker = target.worker_of(fresh[0])
            if new_worker is not None:  # it has beaten at least once: it serves
                info.update(new_pid=fresh[0], new_worker=new_worker,
                            replaced_at=round(clock(), 3),
                            replaced_after_seconds=round(clock() - at, 3))
                break
        time.sleep(0.1)
    return info


def _settle(scraper: observe.Scraper, within: float) -> None:
    """Wait (at most ``within`` s) until every claim started in the load is terminal.

    Jobs accepted late in the load are still running when the last request returns, and
    recovery reconciles a dead worker's jobs on its own schedule: judging half-finished
    work at once would count both. The ``settled`` mark is what the restart verdict reads.
    """
    start, end = scraper.marks.get("load"), scraper.marks.get("end")
    if start is None or end is None or not observe.present(end.samples, CLAIM_SERIES):
        return
    t0 = time.monotonic()
    while True:
        snap = scraper.scrape()
        if snap is not None:
            scraper.marks["settled"] = snap
            if observe.claims_delta(snap.samples, start.samples)["half_finished"] <= 0:
                break
        if time.monotonic() - t0 >= within:
            break
        time.sleep(SETTLE_POLL)
    scraper.settled_after = round(time.monotonic() - t0, 3)


def _observations(scraper: observe.Scraper, result: Any, stalls: list[Any],
                  upstream_stats: dict[str, int], *, stalls_logged: bool) -> Observations:
    start = scraper.marks.get("load") or scraper.marks.get("baseline")
    end = scraper.marks.get("end")
    a = end.samples if end else {}
    b = start.samples if start else {}
    load_snaps = [s for s in scraper.snapshots
                  if result.load_start - 0.6 <= s.at <= result.load_end + 0.6]
    waiting = [sum(observe.series_sum(s.samples, "corevo_offload_waiting").values())
               for s in load_snaps]
    settled = scraper.marks.get("settled") or end  # what happened after the cancels, too
    c = settled.samples if settled else {}
    claims = observe.claims_delta(c, b)
    claims["settled_after_seconds"] = scraper.settled_after
    slot_wait = observe.delta(
        observe.buckets_by(a, "corevo_offload_slot_wait_seconds", None).get("all", {}),
        observe.buckets_by(b, "corevo_offload_slot_wait_seconds", None).get("all"))
    return Observations(
        lag=observe.lag_by_worker(a, b),
        stalls=stalls,
        stall_counts=observe.counter_delta(a, b, "corevo_event_loop_stalls_total", "worker"),
        stalls_logged=stalls_logged,
        driver=result,
        offload_present=observe.present(a, ("corevo_offload_limit",
                                            "corevo_offload_in_flight")),
        offload_rejected=observe.counter_delta(a, b, "corevo_offload_rejected_total", "reason"),
        offload_waiting_max=max(waiting, default=0.0),
        offload_slot_wait=slot_wait,
        late_present=observe.present(c, ("corevo_late_side_effects_total",)),
        late_side_effects=sum(observe.counter_delta(
            c, b, "corevo_late_side_effects_total").values()),
        cancels_requested=sum(observe.counter_delta(
            c, b, "corevo_cancel_requested_total").values()),
        cancels_acknowledged=observe.counter_delta(c, b, "corevo_cancel_delivered_total",
                                                   "path"),
        claims_present=observe.present(c, CLAIM_SERIES),
        claims=claims,
        upstream_stats=upstream_stats,
    )
