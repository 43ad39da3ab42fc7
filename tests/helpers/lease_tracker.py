"""The independent tracker's arithmetic: holder intervals → how many worked at once.

Track files hold ``E holder t [planned]`` (grant, work starts) and ``X holder t`` (work
ended) lines written by the holders themselves; nothing here reads the lease store.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path

Span = tuple[float, float]


def read_spans(tracks: Iterable[Path], died: float | None = None
               ) -> tuple[list[Span], list[str]]:
    """Closed intervals per holder, and holders that entered but never wrote an exit.

    ``died``: the instant the writing process was killed; a holder it cut before its
    exit line worked until then (its interval ends there and it is not listed).
    """
    times: dict[str, list[float]] = {}
    for track in tracks:
        if track.exists():
            for line in track.read_text().splitlines():
                _, holder, t = line.split()[:3]
                times.setdefault(holder, []).append(float(t))
    if died is not None:
        for ts in times.values():
            if len(ts) == 1:
                ts.append(max(ts[0], died))
    spans = [(ts[0], ts[1]) for ts in times.values() if len(ts) == 2]
    return spans, [h for h, ts in times.items() if len(ts) != 2]


def _edges(spans: Sequence[Span]) -> list[tuple[float, int]]:
    # at equal times an enter sorts first: the stricter count
    return sorted([(a, 0) for a, _ in spans] + [(b, 1) for _, b in spans])


def max_overlap(spans: Sequence[Span], since: float = float("-inf")) -> int:
    """Most intervals open at one instant at or after ``since``."""
    best = cur = 0
    for t, kind in _edges([s for s in spans if s[1] >= since]):
        cur += 1 if kind == 0 else -1
        if t >= since:
            best = max(best, cur)
    return best


def first_at(spans: Sequence[Span], level: int, since: float) -> float | None:
    """The first instant at or after ``since`` with at least ``level`` intervals open."""
    cur = 0
    for t, kind in _edges(spans):
        cur += 1 if kind == 0 else -1
        if t >= since and cur >= level:
            return t
    return None


def long_hold_open(tracks: Iterable[Path], now: float, remaining: float) -> bool:
    """Whether some hold is at work now and plans to work ``remaining`` s longer: the
    moment to inject a fault that must cut it."""
    entered: dict[str, float] = {}
    for track in tracks:
        if track.exists():
            for line in track.read_text().splitlines():
                fields = line.split()
                if fields[0] == "E" and len(fields) == 4:
                    entered[fields[1]] = float(fields[2]) + float(fields[3])
                elif fields[0] == "X":
                    entered.pop(fields[1], None)
    return any(end - now >= remaining for end in entered.values())


def await_long_hold(tracks: Iterable[Path], remaining: float, within: float) -> None:
    """Wait (at most ``within`` s) until a hold is at work that plans to go on for
    ``remaining`` s more: a fault injected next that outlasts the holder's deadline must
    cut it, or the run proves little."""
    tracks = list(tracks)
    give_up = time.monotonic() + within
    while not long_hold_open(tracks, time.monotonic(), remaining):
        assert time.monotonic() < give_up, "no long hold was running to be cut"
        time.sleep(0.05)
