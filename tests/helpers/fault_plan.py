"""The seeded fault schedule: which fault, when, for how long — reproducible from a seed.

Faults live on timelines, one per thing they break (the Redis server, the PostgreSQL
server, the worker processes, the CPU, the client clocks, the metrics disk): on one
timeline they follow each other with a gap long enough for the previous one's recovery
to be measured; faults on different timelines overlap freely. The same seed, length and
kinds give the same schedule, so a failing run is replayed by its seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

#: kind -> (timeline, mean gap before it in s, shortest gap in s, duration range in s)
KINDS: dict[str, tuple[str, float, float, tuple[float, float]]] = {
    "redis-kill": ("redis", 10.0, 5.0, (0.2, 3.0)),    # SIGKILL, down, restart empty
    "redis-stop": ("redis", 10.0, 5.0, (1.0, 5.0)),    # SIGSTOP … SIGCONT
    "pg-stop": ("pg", 12.0, 5.0, (1.0, 4.0)),          # pg_ctl stop -m immediate … start
    "worker-kill": ("workers", 5.0, 1.0, (0.0, 0.0)),  # SIGKILL one app worker
    "cpu-hog": ("cpu", 25.0, 3.0, (3.0, 10.0)),        # two busy loops (2 cores)
    "clock-ahead": ("clock", 25.0, 3.0, (5.0, 15.0)),  # a worker with clocks 10 s ahead
    "disk-full": ("disk", 30.0, 5.0, (2.0, 8.0)),      # the metrics tmpfs filled, freed
    # filled, then a worker starts on it (its first metric write has no room), freed
    "disk-full-start": ("disk", 30.0, 5.0, (2.0, 8.0)),
}
#: the kinds aimed at one worker slot (``Fault.target``)
TARGETED = ("worker-kill", "disk-full-start")


@dataclass(frozen=True)
class Fault:
    kind: str
    at: float            # seconds after the run's start
    duration: float
    target: int = 0      # the worker slot, for worker-kill

    @property
    def end(self) -> float:
        return self.at + self.duration

    def __str__(self) -> str:
        target = f" slot {self.target}" if self.kind in TARGETED else ""
        return f"{self.at:7.2f}s {self.kind:<12} {self.duration:5.2f}s{target}"


def generate(seed: int, seconds: float, *, kinds: tuple[str, ...] = tuple(KINDS),
             workers: int = 3, warmup: float = 5.0, cooldown: float = 10.0) -> list[Fault]:
    """Faults in [warmup, seconds - cooldown], sorted by start; a pure function of its
    arguments."""
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown fault kinds: {sorted(unknown)} (known: {list(KINDS)})")
    rng = random.Random(seed)
    faults: list[Fault] = []
    for timeline in sorted({KINDS[k][0] for k in kinds}):
        mine = [k for k in kinds if KINDS[k][0] == timeline]
        t = warmup
        while True:
            kind = rng.choice(mine)
            _, mean_gap, min_gap, (lo, hi) = KINDS[kind]
            t += min_gap + rng.expovariate(1.0 / mean_gap)
            duration = round(rng.uniform(lo, hi), 2)
            if t + duration > seconds - cooldown:
                break
            target = rng.randrange(workers) if kind in TARGETED else 0
            faults.append(Fault(kind, round(t, 2), duration, target))
            t += duration
    return sorted(faults, key=lambda f: (f.at, f.kind))


def describe(seed: int, faults: list[Fault]) -> str:
    """The schedule as printed on a failure: enough to replay and to read."""
    return "\n".join([f"fault schedule, seed {seed}: {len(faults)} faults",
                      *(f"  {f}" for f in faults)])
