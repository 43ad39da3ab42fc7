"""Busy-loop throughput with loop health installed vs without (issue 2 target: <= 1 % loss).

A workload of many tiny tasks runs on a fresh loop per round; variants are interleaved and
the medians of per-round ratios are printed, for wall time and for the process's CPU time
(all threads, so the watchdog thread is charged; CPU time is far less disturbed by other
processes on the machine than wall time).

The baseline carries one idle pending timer: any real service has some, and a pending
timer alone makes asyncio read the clock on every loop iteration, which shifts a
call_soon-heavy loop by a few percent without being the suite's doing.

At default settings the instrumentation wakes about 60 times a second, so its cost sits
below the run-to-run noise of a 0.5 s round. The ``x10`` variant runs the same code at ten
times the wake-up rate (sampler every 2 ms, stall threshold 10 ms); its extra CPU divided
by ten is the default settings' cost with ten times the signal (slightly pessimistic: at a
10 ms threshold the watchdog also catches a few real 10-20 ms pauses, such as a gather of
500 tasks, and captures their stacks; their log lines are silenced here).

The OTel metrics path (issue 38) runs in the same rounds: default settings with the
series bound through ``corevo_obs.otel.instrument_metrics`` on a real SDK
``MeterProvider`` (an ``InMemoryMetricReader``), OTel only and beside prometheus.

The run-to-run noise of wall and CPU time on a shared VM is still a few percent, so
``--instructions`` also counts instructions under callgrind, which repeat exactly: a
bare and an instrumented run at two task counts, the instrumented one with its intervals
stretched by callgrind's measured slowdown so that it wakes as often per task as natively
(the script prints both wake-up rates to check it).

    python bench/loop_bench.py [--rounds 15] [--tasks 60000] [--instructions]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

import callgrind  # bench/callgrind.py, beside this script
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from prometheus_client import CollectorRegistry

from corevo_obs import install_loop_health
from corevo_obs.loop.health import LoopHealth
from corevo_obs.loop.lag import DEFAULT_INTERVAL
from corevo_obs.loop.utilization import LoopUtilization
from corevo_obs.loop.watchdog import DEFAULT_CHECK_INTERVAL, DEFAULT_THRESHOLD
from corevo_obs.otel import instrument_metrics

SCALE = 10
UTILIZATION_ONLY: dict[str, Any] = {}  # by identity: the utilization timer alone
VARIANTS: dict[str, dict[str, Any] | None] = {
    "baseline": None,
    "default": {},
    "sampler only": {"watchdog": False},
    f"x{SCALE} rate": {"interval": DEFAULT_INTERVAL / SCALE,
                       "stall_threshold": DEFAULT_THRESHOLD / SCALE},
    "utilization": UTILIZATION_ONLY,
    "default otel": {"otel": False},  # OTel only ("otel": keep prometheus too)
    "default both": {"otel": True},
}
#: one SDK provider for every OTel round (its instruments are made once)
_PROVIDER = MeterProvider([InMemoryMetricReader()])


async def _tiny(n: int) -> int:
    for _ in range(n):
        await asyncio.sleep(0)
    return n


async def _workload(tasks: int) -> None:
    batch = 500
    for _ in range(tasks // batch):
        await asyncio.gather(*(_tiny(3) for _ in range(batch)))


async def _serial(tasks: int) -> None:
    """One task at a time: a loop iteration (and a select) per await, the worst case for
    anything that costs per iteration, such as the utilization timer."""
    for _ in range(tasks // 10):
        await _tiny(30)


@dataclass
class Round:
    wall: float  # seconds of the workload
    cpu: float  # process CPU seconds (all threads) of the workload
    wakes: int  # sampler ticks + watchdog wake-ups during the workload


def _round(tasks: int, options: dict[str, Any] | None, serial: bool = False) -> Round:
    """One round of the workload on a fresh loop with ``options`` installed (None: bare)."""

    async def main() -> Round:
        idle = asyncio.get_running_loop().call_later(3600, lambda: None)
        health = util = otel = None
        chosen = options
        if chosen is not None and "otel" in chosen:
            otel = instrument_metrics(meter_provider=_PROVIDER, prometheus=chosen["otel"])
            chosen = {k: v for k, v in chosen.items() if k != "otel"}
        if chosen is UTILIZATION_ONLY:
            util = LoopUtilization(registry=CollectorRegistry(), worker="bench").start()
        elif chosen is not None:
            health = install_loop_health(registry=CollectorRegistry(), worker="bench", **chosen)
        await asyncio.sleep(0.05)  # let the sampler settle into its rhythm (and bind)
        before = _wakes(health)
        w0, c0 = time.perf_counter(), time.process_time()
        await (_serial if serial else _workload)(tasks)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        wakes = _wakes(health) - before
        if health is not None:
            await health.aclose()
        if util is not None:
            util.close()
        if otel is not None:
            otel.close()
        idle.cancel()
        return Round(wall, cpu, wakes)

    gc.collect()
    return asyncio.run(main())


def _wakes(health: LoopHealth | None) -> int:
    if health is None:
        return 0
    return health.sampler.ticks + (health.watchdog.wakes if health.watchdog else 0)


def _dilated(slowdown: float) -> dict[str, Any]:
    """Default settings stretched by the slowdown: as many wake-ups per task as natively."""
    return {"interval": DEFAULT_INTERVAL * slowdown,
            "stall_threshold": DEFAULT_THRESHOLD * slowdown,
            "check_interval": DEFAULT_CHECK_INTERVAL * slowdown}


def _counted(variant: str, tasks: int, slowdown: float = 1.0,
             serial: bool = False) -> tuple[int, Round]:
    argv = [__file__, "--only", variant, "--tasks", str(tasks), "--dilate", str(slowdown)]
    argv += ["--serial"] if serial else []
    count, out = callgrind.instructions(argv)
    return count, Round(**json.loads(out))


def instruction_overhead(tasks: int, native_wall: float) -> None:
    """Extra instructions of the default settings per instruction of work, under callgrind.

    Callgrind runs the program tens of times slower, so time-driven wake-ups would come
    that much more often per task; the instrumented run's intervals are stretched by the
    measured slowdown to keep wake-ups per task as they are natively. Each variant runs at
    ``tasks`` and ``2 * tasks`` and only the difference counts, so start-up cancels out.
    """
    base_1, base_r = _counted("baseline", tasks)
    base_2, _ = _counted("baseline", 2 * tasks)
    slowdown = base_r.wall / native_wall
    inst_1, r1 = _counted("default", tasks, slowdown)
    inst_2, r2 = _counted("default", 2 * tasks, slowdown)
    extra = (inst_2 - inst_1) / (base_2 - base_1) - 1
    print(f"callgrind: slowdown x{slowdown:.0f}; wake-ups per 1000 tasks "
          f"{1000 * (r2.wakes - r1.wakes) / tasks:.2f} (the native default run: see above)")
    print(f"callgrind: instructions per task {(base_2 - base_1) / tasks:,.0f} bare, "
          f"{(inst_2 - inst_1) / tasks:,.0f} with loop health -> {extra * 100:+.2f} %")
    otel_1, o1 = _counted("otel", tasks, slowdown)
    otel_2, o2 = _counted("otel", 2 * tasks, slowdown)
    print(f"callgrind: loop health on the OTel path only: "
          f"{(otel_2 - otel_1) / tasks:,.0f} instructions per task -> "
          f"{((otel_2 - otel_1) / (base_2 - base_1) - 1) * 100:+.2f} % vs bare, "
          f"{((otel_2 - otel_1) / (inst_2 - inst_1) - 1) * 100:+.2f} % vs the prometheus "
          f"path; wake-ups per 1000 tasks {1000 * (o2.wakes - o1.wakes) / tasks:.2f}")
    for serial in (False, True):  # the utilization timer alone: no time-driven wake-ups
        if serial:
            base_1, _ = _counted("baseline", tasks, serial=True)
            base_2, _ = _counted("baseline", 2 * tasks, serial=True)
        util_1, _ = _counted("utilization", tasks, serial=serial)
        util_2, _ = _counted("utilization", 2 * tasks, serial=serial)
        extra = (util_2 - util_1) / (base_2 - base_1) - 1
        print(f"callgrind: utilization timer alone, {'serial' if serial else 'batched'} "
              f"workload: {(base_2 - base_1) / tasks:,.0f} -> "
              f"{(util_2 - util_1) / tasks:,.0f} instructions per task, {extra * 100:+.2f} %")


def _median_ratio(a: list[float], b: list[float]) -> float:
    """Median of per-round ratios: robust to the machine drifting between rounds."""
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def _serial_overhead(rounds: int, tasks: int) -> tuple[float, float]:
    """(wall, cpu) ratio of the utilization timer alone on the serial workload."""
    bare: list[Round] = []
    timed: list[Round] = []
    for i in range(rounds):
        for util in (False, True) if i % 2 == 0 else (True, False):
            r = _round(tasks, UTILIZATION_ONLY if util else None, serial=True)
            (timed if util else bare).append(r)
    return (_median_ratio([r.wall for r in timed], [r.wall for r in bare]),
            _median_ratio([r.cpu for r in timed], [r.cpu for r in bare]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--tasks", type=int, default=60000)
    p.add_argument("--instructions", action="store_true",
                   help="also count instructions under callgrind (valgrind, about a minute)")
    p.add_argument("--only", choices=("baseline", "default", "utilization", "otel"),
                   help=argparse.SUPPRESS)
    p.add_argument("--dilate", type=float, default=1.0, help=argparse.SUPPRESS)
    p.add_argument("--serial", action="store_true", help=argparse.SUPPRESS)
    ns = p.parse_args()
    logging.getLogger("corevo_obs.stall").setLevel(logging.ERROR)
    if ns.only:  # one round of one variant, for callgrind
        options = {"baseline": None, "utilization": UTILIZATION_ONLY}.get(
            ns.only, _dilated(ns.dilate))
        if ns.only == "otel":
            options = {**_dilated(ns.dilate), "otel": False}
        print(json.dumps(asdict(_round(ns.tasks, options, serial=ns.serial))))
        return
    if ns.instructions and not callgrind.available():
        p.error("--instructions needs valgrind (apt-get install valgrind)")
    names = list(VARIANTS)
    rounds: dict[str, list[Round]] = {v: [] for v in names}
    _round(ns.tasks // 4, None)  # warm-up
    for i in range(ns.rounds):
        for v in names if i % 2 == 0 else reversed(names):
            rounds[v].append(_round(ns.tasks, VARIANTS[v]))
    wall = {v: [r.wall for r in rs] for v, rs in rounds.items()}
    cpu = {v: [r.cpu for r in rs] for v, rs in rounds.items()}
    print(f"tasks per round: {ns.tasks} (x3 awaits), rounds: {ns.rounds}; "
          "ratios are medians of per-round ratios vs baseline")
    print(f"  {'variant':14s} {'wall ms':>9s} {'wall ratio':>11s} {'cpu ratio':>10s} "
          f"{'wake-ups/s':>11s}")
    for v in names:
        rate = statistics.median(r.wakes / r.wall for r in rounds[v])
        print(f"  {v:14s} {statistics.median(wall[v]) * 1000:9.1f} "
              f"{_median_ratio(wall[v], wall['baseline']):11.4f} "
              f"{_median_ratio(cpu[v], cpu['baseline']):10.4f} {rate:11.1f}")
    scaled = _median_ratio(cpu[f"x{SCALE} rate"], cpu["baseline"]) - 1
    direct = _median_ratio(cpu["default"], cpu["baseline"]) - 1
    per_1000 = statistics.median(1000 * r.wakes / ns.tasks for r in rounds["default"])
    print(f"default: {per_1000:.2f} wake-ups per 1000 tasks")
    print(f"default settings, CPU loss measured directly:        {direct * 100:+.2f} %")
    print(f"default settings, CPU loss from the x{SCALE} run / {SCALE}:    "
          f"{scaled / SCALE * 100:+.2f} %")
    for v in ("default otel", "default both"):
        print(f"{v}: CPU loss {(_median_ratio(cpu[v], cpu['baseline']) - 1) * 100:+.2f} % "
              f"vs baseline, {(_median_ratio(cpu[v], cpu['default']) - 1) * 100:+.2f} % "
              "vs default (the prometheus path)")
    serial = _serial_overhead(ns.rounds, ns.tasks // 4)
    print(f"utilization timer alone, one task at a time (a select per await): "
          f"wall {serial[0]:.4f}, cpu {serial[1]:.4f} vs baseline")
    if ns.instructions:
        cg_tasks = 10_000
        native = statistics.median(wall["baseline"]) * cg_tasks / ns.tasks
        instruction_overhead(cg_tasks, native)
    print("target: loss <= 1 % at default settings (interval 20 ms, threshold 100 ms)")


if __name__ == "__main__":
    main()
