"""Why the loop was late: one bounded cause per stall, with the evidence for it.

High lag is not proof of blocking code: garbage collection, another thread holding the
GIL, CPU starvation of the process and container throttling raise it too. Two readings
bracket every stall — taken by the sampler at the beat before and the beat that ended it
(the loop thread's CPU time and run delay, the process's CPU time, the GC total, the
cgroup's throttled time) — and the watchdog adds what it saw while the stall went on
(the loop thread's stacks, its state and syscall). :func:`attribute` turns that into a
cause, in this order:

1. ``throttled``, ``starved`` or ``gc`` when the cgroup throttled the process, the loop
   thread waited runnable for a CPU, or collections ran, for a large share of the stall
   (the largest share wins): whatever the loop was running would not have been late;
2. ``gil`` when the loop thread hardly ran, was not waiting for a CPU, and another thread
   of the process was busy meanwhile, the loop thread being in its selector wait, in a
   futex (the GIL's wait) or beyond the watchdog's reach;
3. ``import`` when a stack shows the import machinery (a lazy import on the loop);
4. ``blocking`` when a stack shows code running that is not the loop's own selector wait,
   or the loop thread spent the stall on the CPU (C code that held the GIL);
5. ``unknown`` otherwise (e.g. a stopped process, or a host that paused the VM).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from . import schedstat
from .cgroup import CgroupProbe, throttled
from .gcwatch import GcWatch
from .stacks import FrameFilter, FrameInfo, capture_thread

CAUSES: Final = ("blocking", "import", "gc", "gil", "starved", "throttled", "unknown")

MIN_SHARE: Final = 0.3  # the winning part must explain at least this much of the stall
GIL_OTHERS_SHARE: Final = 0.5  # others' CPU per second the loop thread was off the CPU
ON_CPU_SHARE: Final = 0.5

Reading = tuple[float, bytes | None, int, float, tuple[bytes | None, ...]]
"""(monotonic time, loop thread's schedstat, process CPU ns, GC seconds, cpu.stat files)."""


class Probe:
    """The readings a beat takes: about 1.5 µs (a ``pread`` per file, one clock call)."""

    def __init__(self, loop_native_id: int, gc_watch: GcWatch,
                 cgroup: CgroupProbe | None = None) -> None:
        self.loop_native_id = loop_native_id
        self.thread = schedstat.ThreadProbe(loop_native_id)
        self.cgroup = cgroup if cgroup is not None else CgroupProbe()
        self.gc = gc_watch

    def read(self, now: float) -> Reading:
        return (now, self.thread.read(), time.process_time_ns(), self.gc.total,
                self.cgroup.read())

    def close(self) -> None:
        self.thread.close()
        self.cgroup.close()


@dataclass(frozen=True, slots=True)
class Window:
    """What happened between two readings, in seconds (None: not measurable here)."""

    seconds: float
    gc: float
    loop_ran: float | None = None
    loop_waited: float | None = None
    others_ran: float | None = None
    throttled: float | None = None
    times_throttled: int = 0

    @classmethod
    def between(cls, a: Reading | None, b: Reading | None) -> Window | None:
        if a is None or b is None:
            return None
        loop_a, loop_b = schedstat.parse(a[1]), schedstat.parse(b[1])
        ran = waited = others = None
        if loop_a is not None and loop_b is not None:
            ran = (loop_b[0] - loop_a[0]) / 1e9
            waited = (loop_b[1] - loop_a[1]) / 1e9
            others = max(0.0, (b[2] - a[2]) / 1e9 - ran)
        thr_a, thr_b = throttled(a[4]), throttled(b[4])
        thr, times = None, 0
        if thr_a is not None and thr_b is not None and len(a[4]) == len(b[4]):
            thr, times = (thr_b[0] - thr_a[0]) / 1e9, thr_b[1] - thr_a[1]
        return cls(seconds=b[0] - a[0], gc=b[3] - a[3], loop_ran=ran, loop_waited=waited,
                   others_ran=others, throttled=thr, times_throttled=times)

    def measures(self) -> dict[str, float]:
        out = {"window_seconds": self.seconds, "gc_seconds": self.gc}
        for name, value in (("loop_cpu_seconds", self.loop_ran),
                            ("loop_run_delay_seconds", self.loop_waited),
                            ("other_threads_cpu_seconds", self.others_ran),
                            ("throttled_seconds", self.throttled)):
            if value is not None:
                out[name] = value
        return {k: round(v, 6) for k, v in out.items()}


@dataclass(frozen=True)
class Caught:
    """The loop thread as the watchdog saw it during the stall (code locations only)."""

    samples: tuple[tuple[FrameInfo, ...], ...] = ()
    syscall: str | None = None
    state: str | None = None


@dataclass(frozen=True)
class BusyThread:
    """The thread that ran while the loop could not: evidence for ``gil``."""

    name: str
    native_id: int
    cpu_seconds: float
    frames: tuple[FrameInfo, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "native_id": self.native_id,
                "cpu_seconds": round(self.cpu_seconds, 6),
                "frames": [str(f) for f in self.frames]}


@dataclass(frozen=True)
class Attribution:
    cause: str
    summary: str
    evidence: tuple[str, ...] = ()
    culprit: FrameInfo | None = None
    blocker: BusyThread | None = field(default=None)


def _s(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds:.3f}s"


def parts(duration: float, w: Window) -> dict[str, float]:
    """How the stall's seconds split, from the two readings around it.

    Throttled time also shows as run delay (the throttled thread stays queued), so it
    is taken out of ``starved``; collections run on a CPU, so they are taken out of the
    loop thread's CPU time; off-CPU time not spent waiting for a CPU is sleeping (a
    syscall, a lock, or the GIL).
    """
    d = max(duration, 1e-9)
    throttled = min(w.throttled or 0.0, d)
    waited = min(w.loop_waited or 0.0, d)
    gc = min(w.gc, d)
    ran = min(w.loop_ran, d) if w.loop_ran is not None else None
    off = max(0.0, d - (ran or 0.0) - waited) if ran is not None else 0.0
    return {
        "throttled": throttled,
        "starved": max(0.0, waited - throttled),
        "gc": gc,
        "on_cpu": max(0.0, (ran or 0.0) - gc),
        "off_cpu": off,
    }


def _cpu_line(duration: float, w: Window, p: dict[str, float]) -> str:
    return (f"of {duration:.3f}s: loop thread on the CPU {_s(w.loop_ran)}, waiting for a CPU "
            f"{_s(w.loop_waited)}, off the CPU {p['off_cpu']:.3f}s; gc {w.gc:.3f}s; "
            f"cgroup throttled {_s(w.throttled)}; other threads on the CPU {_s(w.others_ran)}")


def gil_candidate(duration: float, window: Window | None) -> bool:
    """Cheap pre-check (before looking for the busy thread): the loop thread was off the
    CPU for most of the stall while other threads of the process ran."""
    if window is None or window.loop_ran is None or window.others_ran is None:
        return False
    off = parts(duration, window)["off_cpu"]
    return off >= MIN_SHARE * duration and window.others_ran >= GIL_OTHERS_SHARE * off


def _caught_line(caught: Caught) -> str | None:
    if caught.syscall == "running":
        return f"loop thread on the CPU when caught (state {caught.state or '?'})"
    if caught.syscall or caught.state:
        return (f"loop thread in {caught.syscall or 'no syscall'} when caught "
                f"(state {caught.state or '?'})")
    return None


def attribute(duration: float, window: Window | None, caught: Caught, frames: FrameFilter,
              blocker: BusyThread | None = None) -> Attribution:
    """The cause of one stall of ``duration`` seconds (see the module docstring)."""
    w = window
    first = caught.samples[0] if caught.samples else ()
    idle = frames.is_idle(first)
    project = frames.innermost_project_frame(first)
    evidence: list[str] = []
    p: dict[str, float] = {}
    if w is not None and w.loop_ran is not None:
        p = parts(duration, w)
        evidence.append(_cpu_line(duration, w, p))
    elif w is not None:
        evidence.append(f"gc {w.gc:.3f}s of {duration:.3f}s (no scheduler readings here)")
        p = {"gc": min(w.gc, duration)}
    said = _caught_line(caught)
    if said:
        evidence.append(said)

    scores = {k: p.get(k, 0.0) for k in ("throttled", "starved", "gc")}
    gil_like = not first or idle or caught.syscall == "futex"
    if gil_like and gil_candidate(duration, w):
        scores["gil"] = p["off_cpu"]
    scores["code"] = p.get("on_cpu", 0.0) + (0.0 if "gil" in scores else p.get("off_cpu", 0.0))
    cause = max(scores, key=lambda k: scores[k])
    if cause != "code" and scores[cause] >= MIN_SHARE * duration:
        where = " while idle in its selector wait" if idle else (
            f" at {project}" if project else "")
        assert w is not None
        if cause == "throttled":
            summary = (f"the cgroup's CPU quota throttled the process {_s(w.throttled)}, "
                       f"{w.times_throttled} times")
        elif cause == "starved":
            summary = f"the loop thread waited {scores[cause]:.3f}s for a CPU{where}"
        elif cause == "gc":
            summary = f"garbage collection ran {w.gc:.3f}s{where}"
        else:
            summary = f"other threads ran {_s(w.others_ran)} while the loop thread waited"
            if blocker is not None:
                summary = (f"thread {blocker.name!r} ran {blocker.cpu_seconds:.3f}s while "
                           "the loop thread waited for the GIL")
                if blocker.frames:
                    evidence.append(f"busy thread {blocker.name!r} at {blocker.frames[-1]}")
        return Attribution(cause, summary, tuple(evidence), culprit=project,
                           blocker=blocker if cause == "gil" else None)
    return _from_stack(duration, w, caught, frames, evidence)


def _from_stack(duration: float, w: Window | None, caught: Caught, frames: FrameFilter,
                evidence: list[str]) -> Attribution:
    """No environmental cause explains the stall: what the loop thread was doing does."""
    first = caught.samples[0] if caught.samples else ()
    project = frames.innermost_project_frame(first)
    for sample in caught.samples:
        if any(frames.kind(f.filename) == "import" for f in sample):
            importer = frames.importing_frame(sample)
            module = frames.imported_module(sample)
            if module is not None:
                evidence.append(f"module body being imported: {module}")
            summary = "a lazy import on the loop" + (f" from {importer}" if importer else "")
            return Attribution("import", summary, tuple(evidence), culprit=importer or project)
    on_cpu = w is not None and w.loop_ran is not None and w.loop_ran >= ON_CPU_SHARE * duration
    if first and not frames.is_idle(first):
        if on_cpu:
            assert w is not None
            how = f"ran {_s(w.loop_ran)} on the CPU"
        elif caught.syscall and caught.syscall != "running":
            how = f"waited in {caught.syscall}"
        else:
            how = "ran code that is not the loop's wait"
        return Attribution("blocking", f"the loop thread {how} in {first[-1].function}",
                           tuple(evidence), culprit=project)
    if not first and on_cpu:
        assert w is not None
        summary = (f"the loop thread ran {_s(w.loop_ran)} on the CPU holding the GIL "
                   "(no stack: the watchdog cannot run while C code holds it)")
        return Attribution("blocking", summary, tuple(evidence))
    summary = "idle in its selector wait, nothing else seen" if first else (
        "stack not captured, nothing else seen")
    return Attribution("unknown", summary, tuple(evidence), culprit=project)


def busiest_thread(since: dict[int, int], exclude: Sequence[int]) -> BusyThread | None:
    """The thread (not in ``exclude``) with the most CPU since the snapshot ``since``
    (which is updated), with its current stack."""
    now = schedstat.threads_cpu()
    best = max(((cpu - since.get(tid, 0), tid) for tid, cpu in now.items()
                if tid not in exclude), default=None)
    since.clear()
    since.update(now)
    if best is None or best[0] <= 0:
        return None
    delta, tid = best
    names = {native: (ident, name) for ident, (native, name) in schedstat.native_ids().items()}
    ident, name = names.get(tid, (None, f"tid {tid}"))
    stack: tuple[FrameInfo, ...] = ()
    if ident is not None:
        stack = capture_thread(ident, 64) or ()
    return BusyThread(name, tid, delta / 1e9, stack)
