"""The workload file: a small TOML document that fixes everything a run depends on.

Seed, duration and request cap, the upstream's fixed latency and response, the probes
that run beside the load, the mix (short requests, long uploads, streamed responses,
WebSockets, background jobs, each with a rate, client cancels and timeouts) and the
budgets. Every problem is reported with the key that holds it, all at once, so a bad file
is one line per mistake and never a traceback::

    examples/loadtest.toml: mix[2].rate: must be a number > 0 and <= 500, got 0
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final, Literal

from ..core.errors import ConfigError
from ..core.fileio import read_regular
from ..core.nesting import loads_toml

MixKind = Literal["short", "upload", "stream", "websocket", "background"]
MIX_KINDS: Final[tuple[str, ...]] = ("short", "upload", "stream", "websocket", "background")
MAX_DURATION: Final = 300.0
MAX_REQUESTS: Final = 100_000
MAX_RATE: Final = 500.0
MAX_BASELINE: Final = 60.0


class WorkloadError(ConfigError):
    """The workload file (or a flag overriding it) is wrong; the message names the key."""


@dataclass(frozen=True)
class UpstreamSpec:
    """The fixed-latency upstream: the same latency and response for every call of a run."""

    latency_seconds: float = 0.05
    body_bytes: int = 64
    stream_chunks: int = 3
    chunk_interval_seconds: float = 0.02
    env: str = "UPSTREAM_URL"
    stream_env: str = "UPSTREAM_STREAM_URL"
    port: int = 0


@dataclass(frozen=True)
class ProbeSpec:
    """A low fixed-rate request beside the load, compared with an idle baseline."""

    path: str
    rate: float
    kind: Literal["short", "stream", "websocket"] = "short"


@dataclass(frozen=True)
class MixEntry:
    """One stream of requests at a Poisson rate.

    ``cancel_fraction`` of them are abandoned by the client (a dropped connection after
    ``cancel_after_seconds``, or after the first chunk / event when that is unset);
    ``timeout_seconds`` is the client's whole-request timeout (expiry counts as a timeout,
    not an error); ``calls_upstream`` puts its failures into the upstream error rate.
    """

    name: str
    kind: MixKind
    path: str
    rate: float
    method: str = "GET"
    timeout_seconds: float | None = None
    cancel_fraction: float = 0.0
    cancel_after_seconds: float | None = None
    upload_bytes: int = 0
    upload_seconds: float = 0.0
    calls_upstream: bool = False


@dataclass(frozen=True)
class Budgets:
    """What a run may cost; a verdict fails when its measurement is certainly over."""

    lag_p99_seconds: float = 0.1
    lag_max_seconds: float = 0.25
    stall_max_seconds: float = 0.25
    heartbeat_p99_increase_seconds: float = 0.1
    first_event_p99_increase_seconds: float = 0.15
    upstream_error_rate: float = 0.01
    offload_rejected: int = 0
    late_side_effects: int = 0
    half_finished: int = 0


@dataclass(frozen=True)
class Workload:
    """One run, entirely determined by this value and the app."""

    source: str
    seed: int
    duration_seconds: float
    max_requests: int
    max_in_flight: int = 256
    baseline_seconds: float = 3.0
    kill_worker_at_seconds: float | None = None
    #: after the load, how long started claims may take to end before they count as
    #: half-finished (jobs still running, a dead worker's jobs awaiting recovery)
    settle_seconds: float = 5.0
    upstream: UpstreamSpec = UpstreamSpec()
    heartbeat: ProbeSpec = ProbeSpec("/items/1", 5.0)
    first_event: ProbeSpec | None = None
    mix: tuple[MixEntry, ...] = ()
    budgets: Budgets = field(default_factory=Budgets)

    def with_overrides(self, *, seed: int | None = None,
                       budgets: dict[str, float] | None = None) -> Workload:
        """Flags over the file; a flag's bad value names the flag."""
        out = self if seed is None else replace(self, seed=seed)
        if budgets:
            errors: list[str] = []
            values = {}
            for key, raw in budgets.items():
                values[key] = _budget_value(key, raw, f"--budget-{key.replace('_', '-')}",
                                            errors)
            if errors:
                raise WorkloadError("; ".join(errors))
            out = replace(out, budgets=replace(out.budgets, **values))
        return out


def budget_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(Budgets))


def load_workload(path: str | Path) -> Workload:
    """Parse and validate ``path``; raises :class:`WorkloadError` naming every bad key."""
    where = str(path)
    try:
        raw = read_regular(path)  # a FIFO or a device is refused at once, never waited on
    except OSError as exc:
        raise WorkloadError(exc.strerror or str(exc), source=where) from None
    try:
        doc = loads_toml(raw.decode("utf-8"))  # thousands of [[[... deep: one line too
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise WorkloadError(f"not valid TOML: {exc}", source=where) from None
    return parse_workload(doc, where)


def parse_workload(doc: dict[str, Any], where: str) -> Workload:
    r = _Reader(where)
    top = r.table(doc, "", {"seed", "duration_seconds", "max_requests", "max_in_flight",
                            "baseline_seconds", "kill_worker_at_seconds", "settle_seconds",
                            "upstream",
                            "probes", "mix", "budgets"})
    seed = r.integer(top, "seed", required=True, low=0, high=2**63 - 1)
    duration = r.number(top, "duration_seconds", required=True, low=1.0, high=MAX_DURATION)
    max_requests = r.integer(top, "max_requests", required=True, low=1, high=MAX_REQUESTS)
    max_in_flight = r.integer(top, "max_in_flight", default=256, low=1, high=4096)
    baseline = r.number(top, "baseline_seconds", default=3.0, low=1.0, high=MAX_BASELINE)
    kill_at = r.number(top, "kill_worker_at_seconds", default=None, low=0.5,
                       high=MAX_DURATION)
    settle = r.number(top, "settle_seconds", default=5.0, low=0.0, high=MAX_BASELINE)
    if kill_at is not None and duration is not None and kill_at >= duration:
        r.error("kill_worker_at_seconds", f"must be before the end of the run "
                f"(duration_seconds = {duration:g}), got {kill_at:g}")

    up = r.table(top.get("upstream", {}), "upstream", {f.name for f in fields(UpstreamSpec)})
    d = UpstreamSpec()
    upstream = UpstreamSpec(
        latency_seconds=_given(r.number(up, "upstream.latency_seconds", low=0.0, high=30.0,
                                        key="latency_seconds"), d.latency_seconds),
        body_bytes=_given(r.integer(up, "upstream.body_bytes", low=0, high=1 << 20,
                                    key="body_bytes"), d.body_bytes),
        stream_chunks=_given(r.integer(up, "upstream.stream_chunks", low=1, high=1000,
                                       key="stream_chunks"), d.stream_chunks),
        chunk_interval_seconds=_given(r.number(up, "upstream.chunk_interval_seconds", low=0.0,
                                               high=10.0, key="chunk_interval_seconds"),
                                      d.chunk_interval_seconds),
        env=r.env_name(up, "upstream.env", "UPSTREAM_URL", key="env"),
        stream_env=r.env_name(up, "upstream.stream_env", "UPSTREAM_STREAM_URL",
                              key="stream_env"),
        port=_given(r.integer(up, "upstream.port", low=0, high=65535, key="port"), d.port),
    )

    probes = r.table(top.get("probes", {}), "probes", {"heartbeat", "first_event"})
    heartbeat = r.probe(probes, "heartbeat", ProbeSpec("/items/1", 5.0))
    first_event = r.probe(probes, "first_event", None)

    mix_raw = top.get("mix", [])
    if not isinstance(mix_raw, list) or not mix_raw:
        r.error("mix", "must be a non-empty array of tables ([[mix]] sections)")
        mix_raw = []
    mix = tuple(e for e in (r.mix_entry(m, i) for i, m in enumerate(mix_raw)) if e)
    names = [m.name for m in mix]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        r.error("mix", f"name {dup!r} is used twice (names key the report)")

    b = r.table(top.get("budgets", {}), "budgets", set(budget_names()))
    defaults = Budgets()
    budgets = Budgets(**{
        name: (_budget_value(name, b[name], f"budgets.{name}", r.errors)
               if name in b else getattr(defaults, name))
        for name in budget_names()})
    r.raise_if_any()
    assert seed is not None and duration is not None and max_requests is not None
    return Workload(
        source=where, seed=seed, duration_seconds=duration, max_requests=max_requests,
        max_in_flight=max_in_flight or 256, baseline_seconds=baseline or 3.0,
        kill_worker_at_seconds=kill_at, upstream=upstream,
        settle_seconds=5.0 if settle is None else settle,
        heartbeat=heartbeat or ProbeSpec("/items/1", 5.0), first_event=first_event,
        mix=mix, budgets=budgets,
    )


def _given(value: Any, default: Any) -> Any:
    return default if value is None else value


def _budget_value(name: str, raw: object, where: str, errors: list[str]) -> Any:
    integral = isinstance(getattr(Budgets(), name), int)
    if isinstance(raw, str):
        try:
            raw = int(raw) if integral else float(raw)
        except ValueError:
            pass
    ok = isinstance(raw, int) if integral else isinstance(raw, int | float)
    if isinstance(raw, bool) or not ok or not math.isfinite(float(raw)) or float(raw) < 0:  # type: ignore[arg-type]
        what = "an integer >= 0" if integral else "a number >= 0"
        errors.append(f"{where}: must be {what}, got {raw!r}")
        return 0
    if name == "upstream_error_rate" and float(raw) > 1:  # type: ignore[arg-type]
        errors.append(f"{where}: is a fraction (0..1), got {raw!r}")
    return raw


class _Reader:
    """Collects every error, each naming its key, and raises them together."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.errors: list[str] = []

    def error(self, key: str, message: str) -> None:
        self.errors.append(f"{key}: {message}")

    def raise_if_any(self) -> None:
        if self.errors:
            raise WorkloadError("; ".join(self.errors), source=self.where)

    def table(self, value: object, name: str, allowed: set[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            self.error(name or "(top level)", "must be a table")
            return {}
        for key in sorted(set(value) - allowed):
            full = f"{name}.{key}" if name else key
            self.error(full, f"unknown key (known: {', '.join(sorted(allowed))})")
        return value

    def number(self, t: dict[str, Any], name: str, *, default: float | None = None,
               required: bool = False, low: float, high: float,
               key: str | None = None) -> float | None:
        raw = t.get(key or name)
        if raw is None:
            if required:
                self.error(name, "is required")
            return default
        if isinstance(raw, bool) or not isinstance(raw, int | float) \
                or not math.isfinite(raw) or not low <= raw <= high:
            self.error(name, f"must be a number within {low:g}..{high:g}, got {raw!r}")
            return default
        return float(raw)

    def integer(self, t: dict[str, Any], name: str, *, default: int | None = None,
                required: bool = False, low: int, high: int,
                key: str | None = None) -> int | None:
        raw = t.get(key or name)
        if raw is None:
            if required:
                self.error(name, "is required")
            return default
        if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
            self.error(name, f"must be an integer within {low}..{high}, got {raw!r}")
            return default
        return raw

    def env_name(self, t: dict[str, Any], name: str, default: str, *, key: str) -> str:
        raw = t.get(key, default)
        if not isinstance(raw, str) or not raw.isidentifier():
            self.error(name, f"must be an environment variable name, got {raw!r}")
            return default
        return raw

    def path(self, t: dict[str, Any], name: str, key: str = "path") -> str:
        raw = t.get(key)
        if not isinstance(raw, str) or not raw.startswith("/") or any(
                c.isspace() for c in raw):
            self.error(name, f"must be a path starting with '/' (no spaces), got {raw!r}")
            return "/"
        return raw

    def rate(self, t: dict[str, Any], name: str) -> float:
        raw = t.get("rate")
        if isinstance(raw, bool) or not isinstance(raw, int | float) \
                or not math.isfinite(raw) or not 0 < raw <= MAX_RATE:
            self.error(name, f"must be a number > 0 and <= {MAX_RATE:g} (per second), "
                             f"got {raw!r}")
            return 1.0
        return float(raw)

    def probe(self, probes: dict[str, Any], key: str,
              default: ProbeSpec | None) -> ProbeSpec | None:
        if key not in probes:
            return default
        name = f"probes.{key}"
        t = self.table(probes[key], name, {"path", "rate", "kind"})
        kind = t.get("kind", "short" if key == "heartbeat" else "stream")
        if kind not in ("short", "stream", "websocket"):
            self.error(f"{name}.kind", f"must be short, stream or websocket, got {kind!r}")
            kind = "short"
        rate = self.rate(t, f"{name}.rate")
        if rate > 50:
            self.error(f"{name}.rate", f"a probe runs at a low rate (<= 50/s), got {rate:g}")
        return ProbeSpec(self.path(t, f"{name}.path"), rate, kind)

    def mix_entry(self, raw: object, i: int) -> MixEntry | None:
        at = f"mix[{i}]"
        allowed = {"name", "kind", "path", "rate", "method", "timeout_seconds",
                   "cancel_fraction", "cancel_after_seconds", "upload_bytes",
                   "upload_seconds", "calls_upstream"}
        t = self.table(raw, at, allowed)
        if not t:
            return None
        kind = t.get("kind")
        if kind not in MIX_KINDS:
            self.error(f"{at}.kind", f"must be one of {', '.join(MIX_KINDS)}, got {kind!r}")
            return None
        name = t.get("name", f"{kind}{i}")
        if not isinstance(name, str) or not name or len(name) > 40 \
                or not all(c.isalnum() or c in "-_" for c in name):
            self.error(f"{at}.name", f"must be 1-40 letters, digits, '-' or '_', got {name!r}")
            name = f"{kind}{i}"
        default_method = "POST" if kind in ("upload", "background") else "GET"
        method = t.get("method", default_method)
        if kind == "websocket" and method != "GET":
            self.error(f"{at}.method", "a WebSocket opens with GET")
        if method not in ("GET", "POST", "PUT", "PATCH", "DELETE"):
            self.error(f"{at}.method", f"must be GET, POST, PUT, PATCH or DELETE, got {method!r}")
            method = default_method
        fraction = self.number(t, f"{at}.cancel_fraction", default=0.0, low=0.0, high=1.0,
                               key="cancel_fraction") or 0.0
        upload_bytes = self.integer(t, f"{at}.upload_bytes", default=0, low=0,
                                    high=256 << 20, key="upload_bytes") or 0
        upload_seconds = self.number(t, f"{at}.upload_seconds", default=0.0, low=0.0,
                                     high=120.0, key="upload_seconds") or 0.0
        if kind == "upload" and upload_bytes <= 0:
            self.error(f"{at}.upload_bytes", "an upload needs upload_bytes > 0")
        if kind != "upload" and ("upload_bytes" in t or "upload_seconds" in t):
            self.error(f"{at}.upload_bytes", f"only for kind = \"upload\", not {kind!r}")
        calls_upstream = t.get("calls_upstream", False)
        if not isinstance(calls_upstream, bool):
            self.error(f"{at}.calls_upstream", f"must be true or false, got {calls_upstream!r}")
            calls_upstream = False
        return MixEntry(
            name=name, kind=kind, path=self.path(t, f"{at}.path"),
            rate=self.rate(t, f"{at}.rate"), method=method,
            timeout_seconds=self.number(t, f"{at}.timeout_seconds", low=0.01, high=300.0,
                                        key="timeout_seconds"),
            cancel_fraction=fraction,
            cancel_after_seconds=self.number(t, f"{at}.cancel_after_seconds", low=0.0,
                                             high=300.0, key="cancel_after_seconds"),
            upload_bytes=upload_bytes, upload_seconds=upload_seconds,
            calls_upstream=calls_upstream,
        )
