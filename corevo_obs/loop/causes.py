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
   (the largest share wins): whatever the loop was running would not have been late —
   unless its own part alone reached the stall threshold (a slow import stretched by a
   busy machine is still the import's stall);
2. ``gil`` when the loop thread hardly ran, was not waiting for a CPU, and another thread
   of the process was busy meanwhile, the loop thread being in its selector wait, in a
   futex (the GIL's wait) or beyond the watchdog's reach;
3. ``import`` when a stack shows the import machinery (a lazy import on the loop);
4. ``blocking`` when a stack shows code running that is not the loop's own selector wait,
   or the loop thread spent the stall on the CPU (C code that held the GIL);
5. ``unknown`` otherwise (e.g. a stopped process, or a host that paused the VM).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from . import schedstat
from .cgroup import CgroupProbe, throttled
from .stacks import FrameFilter, FrameInfo, capture_thread

CAUSES: Final = ("blocking", "import", "gc", "gil", "starved", "throttled", "unknown")

MIN_SHARE: Final = 0.3  # the winning part must explain at least this much of the stall
GIL_OTHERS_SHARE: Final = 0.3  # others' CPU, as a share of the stall
ON_CPU_SHARE: Final = 0.5

Beat = tuple[float, int, int, float]
"""Taken by the loop thread at each sampler beat, with calls that keep the GIL (a file
read would release it, and under a busy thread getting it back costs a switch interval):
(monotonic time, loop thread CPU ns, process CPU ns, GC seconds)."""

Sched = tuple[float, bytes | None, tuple[bytes | None, ...]]
"""Taken by the watchdog thread at each of its wakes: (monotonic time, the loop thread's
schedstat, the cgroup cpu.stat files)."""


class Probe:
    """The files the watchdog re-reads (a ``pread`` each, about 0.5 µs)."""

    def __init__(self, loop_native_id: int, cgroup: CgroupProbe | None = None) -> None:
        self.loop_native_id = loop_native_id
        self.thread = schedstat.ThreadProbe(loop_native_id)
        self.cgroup = cgroup if cgroup is not None else CgroupProbe()

    def read(self, now: float) -> Sched:
        return (now, self.thread.read(), self.cgroup.read())

    def close(self) -> None:
        self.thread.close()
        self.cgroup.close()


@dataclass(frozen=True, slots=True)
class Window:
    """What happened around one stall, in seconds (None: not measurable here).

    ``seconds`` spans the beats before and after the stall (CPU times and GC come from
    them); ``sched_seconds`` spans the watchdog's readings around it (run delay and
    throttling come from those, a little wider).
    """

    seconds: float
    gc: float
    loop_ran: float | None = None
    others_ran: float | None = None
    sched_seconds: float | None = None
    loop_waited: float | None = None
    throttled: float | None = None
    times_throttled: int = 0

    @classmethod
    def between(cls, a: Beat | None, b: Beat | None, sa: Sched | None = None,
                sb: Sched | None = None) -> Window | None:
        if a is None or b is None:
            return None
        ran = (b[1] - a[1]) / 1e9
        others = max(0.0, (b[2] - a[2]) / 1e9 - ran)
        span = waited = thr = None
        times = 0
        if sa is not None and sb is not None and sb[0] > sa[0]:
            span = sb[0] - sa[0]
            loop_a, loop_b = schedstat.parse(sa[1]), schedstat.parse(sb[1])
            if loop_a is not None and loop_b is not None:
                waited = (loop_b[1] - loop_a[1]) / 1e9
            thr_a, thr_b = throttled(sa[2]), throttled(sb[2])
            if thr_a is not None and thr_b is not None and len(sa[2]) == len(sb[2]):
                thr, times = (thr_b[0] - thr_a[0]) / 1e9, thr_b[1] - thr_a[1]
        return cls(seconds=b[0] - a[0], gc=b[3] - a[3], loop_ran=ran, others_ran=others,
                   sched_seconds=span, loop_waited=waited, throttled=thr,
                   times_throttled=times)

    def measures(self) -> dict[str, float]:
        out = {"window_seconds": self.seconds, "gc_seconds": self.gc}
        for name, value in (("loop_cpu_seconds", self.loop_ran),
                            ("other_threads_cpu_seconds", self.others_ran),
                            ("sched_window_seconds", self.sched_seconds),
                            ("loop_run_delay_seconds", self.loop_waited),
                            ("throttled_seconds", self.throttled)):
            if value is not None:
                out[name] = value
        out = {k: round(v, 6) for k, v in out.items()}
        if self.throttled is not None:
            out["times_throttled"] = self.times_throttled
        return out


@dataclass(frozen=True)
class Caught:
    """The loop thread as the watchdog saw it during the stall (code locations only)."""

    samples: tuple[tuple[FrameInfo, ...], ...] = ()
    syscall: str | None = None
    state: str | None = None


@dataclass(frozen=True)
class BusyThread:
    """The thread that ran while the loop could not: evidence for ``gil``.

    ``cpu_seconds`` and ``waited_seconds`` (runnable, waiting for a CPU: a GIL holder on a
    loaded machine keeps the GIL meanwhile) are measured between the watchdog's previous
    look at the threads and this one, ``over_seconds`` apart (None: no earlier look)."""

    name: str
    native_id: int
    cpu_seconds: float
    frames: tuple[FrameInfo, ...] = ()
    waited_seconds: float = 0.0
    over_seconds: float | None = None

    @property
    def held_seconds(self) -> float:
        """Seconds it ran or was ready to run: how long it can have held the GIL."""
        return self.cpu_seconds + self.waited_seconds

    def explains(self, duration: float) -> bool:
        """Whether it was busy for a fair share of a stall of ``duration`` seconds (or
        of the span it was measured over, when that is shorter)."""
        return self._busy(min, duration)

    def busy_for(self, duration: float) -> bool:
        """Whether it was busy for a fair share of the stall *and* of the span it was
        measured over: evidence enough to call a stall gil by itself (a look at the
        threads an hour before counts a pool's hour of work, which says nothing)."""
        return self._busy(max, duration)

    def _busy(self, pick: Callable[[float, float], float], duration: float) -> bool:
        basis = duration if self.over_seconds is None else pick(duration, self.over_seconds)
        return self.held_seconds >= GIL_OTHERS_SHARE * basis

    def describe(self) -> str:
        waited = (f" and waited {self.waited_seconds:.3f}s for a CPU"
                  if self.waited_seconds >= 0.0005 else "")
        over = "" if self.over_seconds is None else f" in the last {self.over_seconds:.3f}s"
        return f"thread {self.name!r} ran {self.cpu_seconds:.3f}s{waited}{over}"

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "native_id": self.native_id,
                "cpu_seconds": round(self.cpu_seconds, 6),
                "waited_seconds": round(self.waited_seconds, 6),
                "over_seconds": None if self.over_seconds is None else round(
                    self.over_seconds, 6),
                "frames": [str(f) for f in self.frames]}


@dataclass(frozen=True)
class Attribution:
    cause: str
    summary: str
    evidence: tuple[str, ...] = ()
    culprit: FrameInfo | None = None
    blocker: BusyThread | None = field(default=None)


def _s(seconds: float | None) -> str:
    return "an unmeasured time" if seconds is None else f"{seconds:.3f}s"


def _known(*items: tuple[str, float | None]) -> list[str]:
    """``label 0.123s`` for each measured item; an unmeasured one is left out (a report
    never prints a placeholder)."""
    return [f"{label} {value:.3f}s" for label, value in items if value is not None]


def parts(duration: float, w: Window) -> dict[str, float]:
    """How the stall's seconds split, from the readings around it.

    The readings bracket the stall, so each amount is capped at the stall: the part of
    it outside the stall is unknown, and a loop that was late is rarely the worse for
    the seconds just before or after (a diluting share would miss the idle loop whose
    starved watchdog read the files far apart). Throttled time also shows as run delay
    (the throttled thread stays queued), so it is taken out of ``starved``; collections
    run on a CPU, so they are taken out of the loop thread's CPU time; time neither on a
    CPU nor waiting for one is ``off_cpu`` (a syscall, a lock, the GIL).
    """
    def part(value: float | None) -> float:
        return min(max(value or 0.0, 0.0), duration)

    throttled, waited, gc, ran = (part(w.throttled), part(w.loop_waited), part(w.gc),
                                  part(w.loop_ran))
    if w.times_throttled > 0:
        # the group was throttled in the window: its run delay is the throttle, even when
        # the kernel has not yet added the period to throttled time (seen on v1)
        throttled = max(throttled, waited)
    return {
        "throttled": throttled,
        "starved": max(0.0, waited - throttled),
        "gc": gc,
        "on_cpu": max(0.0, ran - gc),
        "off_cpu": max(0.0, duration - ran - waited) if w.loop_ran is not None else 0.0,
    }


def _cpu_line(w: Window) -> str:
    cpu = _known(("loop thread on the CPU", w.loop_ran), ("other threads", w.others_ran),
                 ("gc", w.gc))
    line = f"between the beats around it ({w.seconds:.3f}s): {', '.join(cpu)}"
    sched = _known(("loop thread waiting for a CPU", w.loop_waited),
                   ("cgroup throttled", w.throttled))
    if w.throttled is not None:
        sched[-1] += f" ({w.times_throttled} times)"
    if w.sched_seconds is None or not sched:
        return line + "; run delay and throttling not measured around it"
    return line + f"; over {w.sched_seconds:.3f}s: {', '.join(sched)}"


def loop_off_cpu(duration: float, window: Window | None) -> bool:
    """The loop thread was neither on a CPU nor waiting for one for a good share of the
    stall (a wait in code, a lock, the GIL)."""
    if window is None or window.loop_ran is None:
        return False
    return parts(duration, window)["off_cpu"] >= MIN_SHARE * duration


def waits_like_gil(caught: Caught, frames: FrameFilter) -> bool:
    """The loop thread was caught where a wait for the GIL leaves it: in its selector
    wait, in a futex, or not at all (the watchdog could not run either)."""
    first = caught.samples[0] if caught.samples else ()
    return not first or frames.is_idle(first) or caught.syscall == "futex"


def may_be_gil(duration: float, window: Window | None, caught: Caught,
               frames: FrameFilter) -> bool:
    """Cheap pre-check, before looking for a busy thread: could this stall be ``gil``?"""
    return loop_off_cpu(duration, window) and waits_like_gil(caught, frames)


def gil_candidate(duration: float, window: Window | None,
                  blocker: BusyThread | None = None) -> bool:
    """The loop thread was off the CPU for most of the stall while other threads of the
    process ran, or a busy thread was found that ran or waited to run meanwhile.

    Others' CPU is taken as measured, capped at the stall: a thread holding the GIL
    keeps the loop from its next beat too, so the window around a GIL stall is longer
    than the stall, and spreading others' CPU evenly over it would undercount. On a
    loaded machine the thread holding the GIL runs a fraction of the stall and waits for
    a CPU the rest: the busy thread's run delay counts then, if it was measured over a
    span short enough to say so."""
    if not loop_off_cpu(duration, window):
        return False
    assert window is not None
    others = min(window.others_ran, duration) if window.others_ran is not None else 0.0
    if blocker is not None and blocker.busy_for(duration):
        others = max(others, min(blocker.held_seconds, duration))
    return others >= GIL_OTHERS_SHARE * duration


def _caught_line(caught: Caught) -> str | None:
    state = f" (state {caught.state})" if caught.state else ""
    if caught.syscall == "running":
        return f"loop thread on the CPU when caught{state}"
    if caught.syscall or caught.state:
        return f"loop thread in {caught.syscall or 'no syscall'} when caught{state}"
    return None


def attribute(duration: float, window: Window | None, caught: Caught, frames: FrameFilter,
              blocker: BusyThread | None = None,
              threshold: float | None = None) -> Attribution:
    """The cause of one stall of ``duration`` seconds (see the module docstring);
    ``threshold``: the stall threshold, which the code's own part may reach alone."""
    w = window
    if blocker is not None and not blocker.explains(duration):
        blocker = None  # it barely ran: not what held the GIL
    first = caught.samples[0] if caught.samples else ()
    idle = frames.is_idle(first)
    # an idle loop's innermost project frame is whatever called asyncio.run: not a culprit
    project = None if idle else frames.innermost_project_frame(first)
    evidence: list[str] = []
    p: dict[str, float] = {}
    if w is not None and w.loop_ran is not None:
        p = parts(duration, w)
        evidence.append(_cpu_line(w))
    elif w is not None:
        evidence.append(f"gc {w.gc:.3f}s of {duration:.3f}s (no CPU readings around it)")
        p = {"gc": min(w.gc, duration)}
    said = _caught_line(caught)
    if said:
        evidence.append(said)

    scores = {k: p.get(k, 0.0) for k in ("throttled", "starved", "gc")}
    if waits_like_gil(caught, frames) and gil_candidate(duration, w, blocker):
        scores["gil"] = p["off_cpu"]
    # off-CPU time is the code's only when the stack shows the loop inside it (a blocking
    # call), or when no stack was caught: an idle loop's time off the CPU is not code
    code_off = "gil" not in scores and (not first or not idle)
    scores["code"] = p.get("on_cpu", 0.0) + (p.get("off_cpu", 0.0) if code_off else 0.0)
    cause = max(scores, key=lambda k: scores[k])
    if threshold is not None and scores["code"] >= threshold:
        cause = "code"  # it would have stalled the loop on an idle machine too
    if cause != "code" and scores[cause] >= MIN_SHARE * duration:
        where = " while idle in its selector wait" if idle else (
            f" at {project}" if project else "")
        assert w is not None
        if cause == "throttled":
            summary = (f"the cgroup's CPU quota throttled the process {_s(w.throttled)}, "
                       f"{w.times_throttled} times")
        elif cause == "starved":
            summary = f"the loop thread waited {_s(w.loop_waited)} for a CPU{where}"
        elif cause == "gc":
            summary = f"garbage collection ran {w.gc:.3f}s{where}"
        else:
            summary = f"other threads ran {_s(w.others_ran)} while the loop thread waited"
            if blocker is not None:
                summary = f"{blocker.describe()} while the loop thread waited for the GIL"
                if blocker.frames:
                    evidence.append(f"busy thread {blocker.name!r} at {blocker.frames[-1]}")
        return Attribution(cause, summary, tuple(evidence), culprit=project,
                           blocker=blocker if cause == "gil" else None)
    return _from_stack(duration, w, caught, frames, evidence)


def _from_stack(duration: float, w: Window | None, caught: Caught, frames: FrameFilter,
                evidence: list[str]) -> Attribution:
    """No environmental cause explains the stall: what the loop thread was doing does."""
    first = caught.samples[0] if caught.samples else ()
    project = None if frames.is_idle(first) else frames.innermost_project_frame(first)
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


@dataclass
class ThreadLook:
    """The watchdog's last look at every thread's schedstat, and when it ended (under a
    thread holding the GIL each file read waits a switch interval: a look can take
    seconds)."""

    at: float | None = None
    sched: dict[int, tuple[int, int]] = field(default_factory=dict)

    def take(self, clock: Callable[[], float]) -> float:
        """Look again; returns when the look ended."""
        self.sched = schedstat.threads_sched()
        self.at = at = clock()
        return at


def busiest_thread(since: ThreadLook, clock: Callable[[], float], exclude: Sequence[int],
                   names: dict[int, str] | None = None) -> BusyThread | None:
    """The thread (not in ``exclude``) that ran or waited to run the most since the look
    ``since`` (which is then retaken), with its current stack. ``names`` (native id ->
    name, kept by the caller) names a thread that has ended since it held the GIL."""
    before, at = since.sched, since.at
    now = since.take(clock)
    deltas = []
    for tid, (cpu, wait) in since.sched.items():
        if tid not in exclude:
            cpu0, wait0 = before.get(tid, (0, 0))
            deltas.append((cpu - cpu0 + wait - wait0, cpu - cpu0, tid))
    best = max(deltas, default=None)
    if best is None or best[0] <= 0:
        return None
    held, ran, tid = best
    live = {native: (ident, name) for ident, (native, name) in schedstat.native_ids().items()}
    ident, name = live.get(tid, (None, (names or {}).get(tid, f"tid {tid}")))
    stack = (capture_thread(ident, 64) or ()) if ident is not None else ()
    return BusyThread(name, tid, ran / 1e9, stack, waited_seconds=(held - ran) / 1e9,
                      over_seconds=None if at is None else max(0.0, now - at))
