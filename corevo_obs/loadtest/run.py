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
from .report import write_report
from .server import LogTail, Target, check_loopback, serve_app
from .upstream import start_upstream
from .verdicts import Observations, Verdict, judge
from .workload import Workload, WorkloadError

REPLACE_WAIT = 20.0


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
            await asyncio.to_thread(scraper.mark, name)  # type: ignore[union-attr]

        async def kill() -> dict[str, Any]:
            return await asyncio.to_thread(_kill_one, tgt, clock, workload.seed)

        driver = Driver(workload, target.base_url, clock=clock,
                        kill=kill if target.served else _no_kill, on_phase=on_phase)
        result = asyncio.run(driver.run())
        scraper.mark("end")
        scraper.stop()
        if not target.served and target.log is not None:
            time.sleep(0.3)  # the last lines the app wrote
            target.log.join()
        stalls = list(target.log.stalls) if target.log else []
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
            scraper.stop()
        if target is not None and target.served:
            target.stop()
            if target.mp_dir is not None:
                shutil.rmtree(target.mp_dir, ignore_errors=True)
        upstream.stop()


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
    claims_names = ("corevo_claim_total", "corevo_claim_start_total",
                    "corevo_job_terminal_total", "corevo_events_projected_total")
    started = observe.counter_delta(a, b, "corevo_claim_start_total", "outcome")
    terminal = observe.counter_delta(a, b, "corevo_job_terminal_total", "state")
    claims = {
        "won": observe.counter_delta(a, b, "corevo_claim_total", "outcome").get("won", 0.0),
        "started": started.get("started", 0.0), "fenced": started.get("fenced", 0.0),
        "terminal": terminal,
        "reclaimed": sum(observe.counter_delta(a, b, "corevo_claim_reclaimed_total").values()),
        "events": observe.counter_delta(a, b, "corevo_events_projected_total", "outcome"),
        "half_finished": max(0.0, started.get("started", 0.0) - sum(terminal.values())),
    }
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
        late_present=observe.present(a, ("corevo_late_side_effects_total",)),
        late_side_effects=sum(observe.counter_delta(
            a, b, "corevo_late_side_effects_total").values()),
        claims_present=observe.present(a, claims_names),
        claims=claims,
        upstream_stats=upstream_stats,
    )
