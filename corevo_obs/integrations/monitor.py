"""Opt-in aiomonitor on a worker's loop, with the suite's commands: lag, stalls, offloads, leases.

aiomonitor is a live REPL into the process (it can cancel tasks, send signals and, if
enabled, open a Python console), so it binds 127.0.0.1 and any other host is refused
unless ``allow_remote=True``. Its commands run on the monitor's own thread, so ``lag`` and
``stalls`` still answer while the worker's loop is frozen.

Offload adapters and lease holders show up through a small provider registry: anything
with ``snapshot() -> dict`` (or a zero-argument callable returning one) registered under
a kind (``"offload"`` or ``"lease"``) and a name.

Example::

    async def main():
        health = install_loop_health(worker="w0")
        with install_monitor(health, port=20101):     # telnet 127.0.0.1 20101 → `lag`
            await serve()
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol, cast, runtime_checkable

from ..core.errors import ConfigError

if TYPE_CHECKING:
    from ..loop.health import LoopHealth
    from .pyspy import NativeStallCapture

__all__ = ["Inspectable", "MonitorError", "install_monitor", "register_inspectable",
           "track_leases", "track_offload"]

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 20101
DEFAULT_WEBUI_PORT: Final = 20102
DEFAULT_CONSOLE_PORT: Final = 20103
RECENT_WINDOW: Final = 60  # seconds covered by "recent max" lag
KINDS: Final = ("offload", "lease")


class MonitorError(ConfigError):
    """The monitor cannot start as asked (aiomonitor missing, non-loopback host)."""


# --- provider registry ------------------------------------------------------------------

@runtime_checkable
class Inspectable(Protocol):
    """Something the monitor can show: a plain, JSON-able dict of its current state."""

    def snapshot(self) -> Mapping[str, Any]: ...


Provider = Inspectable | Callable[[], Mapping[str, Any]]
_providers: dict[tuple[str, str], Provider] = {}
_providers_lock = threading.Lock()


def register_inspectable(kind: str, name: str, provider: Provider) -> Callable[[], None]:
    """Show ``provider`` under ``kind`` ("offload" or "lease"); returns an unregister function.

    Snapshot keys the monitor knows: offloads — ``in_flight``, ``limit``, ``waiting``,
    ``sunk``, ``closed``, ``callers_gone``, ``oldest`` (seconds); leases — ``limit`` and
    ``held``: a list of ``{"holder", "age", "lost", "degraded"}`` (age in seconds). Other
    keys are printed as they are.
    """
    if kind not in KINDS:
        raise ConfigError(f"kind must be one of {KINDS}, got {kind!r}", source="monitor")
    key = (kind, name)
    with _providers_lock:
        _providers[key] = provider

    def unregister() -> None:
        with _providers_lock:
            if _providers.get(key) is provider:
                del _providers[key]

    return unregister


def snapshots(kind: str) -> list[tuple[str, Mapping[str, Any] | Exception]]:
    """Every provider of ``kind``, sorted by name; a failing provider yields its exception."""
    with _providers_lock:
        items = sorted((n, p) for (k, n), p in _providers.items() if k == kind)
    out: list[tuple[str, Mapping[str, Any] | Exception]] = []
    for name, provider in items:
        try:
            snap = provider.snapshot() if isinstance(provider, Inspectable) else provider()
            out.append((name, dict(snap)))
        except Exception as exc:  # noqa: BLE001 - one broken provider must not hide the rest
            out.append((name, exc))
    return out


def offload_snapshot(adapter: Any) -> Callable[[], Mapping[str, Any]]:
    """A provider for an ``OffloadAdapter`` (duck-typed on its public state)."""

    def snap() -> Mapping[str, Any]:
        return {
            "in_flight": adapter.in_flight, "limit": adapter.max_in_flight,
            "waiting": adapter.waiting, "sunk": adapter.sunk, "closed": adapter.closed,
        }

    return snap


def track_offload(adapter: Any) -> Callable[[], None]:
    """Show an ``OffloadAdapter`` under ``offloads`` (by its name); returns unregister.

    Its own ``snapshot()`` is used when it has one (it adds callers gone and the oldest
    operation's age); otherwise the public attributes read by ``offload_snapshot``.
    """
    provider = adapter if isinstance(adapter, Inspectable) else offload_snapshot(adapter)
    return register_inspectable("offload", adapter.name, provider)


class LeaseHoldings:
    """The leases this process got from one store and has not released, with their age.

    Reads the store's own record of its live handles (``store.track()``, sync or async
    alike); handles are held weakly, so a dropped lease disappears once collected. A
    degraded (fail-open) lease never reaches the store on release and stays listed until
    it is collected.
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        self._held: Mapping[str, Any] = store.track()

    def snapshot(self) -> Mapping[str, Any]:
        now = time.monotonic()
        held = [
            {"holder": h.holder, "age": now - h.granted_at, "lost": h.lost,
             "degraded": h.degraded}
            for h in list(self._held.values())
        ]
        return {"limit": self.store.limit, "held": held}


def track_leases(store: Any) -> Callable[[], None]:
    """Show the leases this worker holds from ``store`` under ``leases``; returns unregister.

    Call it before the first ``acquire`` on that store.
    """
    return register_inspectable("lease", store.quota, LeaseHoldings(store))


# --- recent lag window ------------------------------------------------------------------

class RecentLag:
    """Per-second lag maxima over the last ``window`` seconds (a beat listener, O(1))."""

    def __init__(self, window: int = RECENT_WINDOW) -> None:
        self.window = window
        self._max = [0.0] * window
        self._second = [-1] * window

    def __call__(self, now: float, lag: float) -> None:
        second = int(now)
        slot = second % self.window
        if self._second[slot] != second:
            self._second[slot] = second
            self._max[slot] = lag
        elif lag > self._max[slot]:
            self._max[slot] = lag

    def max(self, now: float) -> float:
        floor = int(now) - self.window
        return max((m for m, s in zip(self._max, self._second, strict=True) if s > floor),
                   default=0.0)


# --- command output (plain text; also used by tests and logs) ---------------------------

def _fmt_lag(health: LoopHealth, recent: RecentLag) -> str:
    s = health.sampler
    lines = [
        f"worker {health.worker}: lag now {s.last_lag:.4f}s, "
        f"max {recent.max(time.monotonic()):.4f}s over the last {recent.window}s, "
        f"max {s.max_lag:.4f}s since start"
    ]
    wd = health.watchdog
    if wd is not None:
        stalled = wd.stalled_for
        state = f"FROZEN NOW for {stalled:.3f}s" if stalled >= wd.threshold else "running"
        lines.append(
            f"loop {state} (stall threshold {wd.threshold:.3f}s, {len(wd.reports)} report(s))"
        )
    return "\n".join(lines)


def _fmt_stalls(health: LoopHealth, native: NativeStallCapture | None, count: int) -> str:
    reports = health.reports[-count:] if count > 0 else []
    ongoing = health.watchdog.ongoing if health.watchdog is not None else None
    now = [f"in progress now: {ongoing.format()}"] if ongoing is not None else []
    if not reports:
        return "\n".join([f"worker {health.worker}: no stalls recorded", *now])
    out = [f"worker {health.worker}: last {len(reports)} of {len(health.reports)} stall(s)",
           *now]
    for r in reports:
        ago = time.time() - r.ended_at
        out.append(f"[{ago:.1f}s ago] {r.format()}")
    if native is not None and native.captures:
        last = native.captures[-1].format()
        out.append(f"native stack (py-spy) of the last long stall:\n{last}")
    elif native is not None and native.disabled:
        out.append(f"native capture disabled: {native.disabled}")
    return "\n".join(out)


def _fmt_providers(kind: str, render: Callable[[str, dict[str, Any]], list[str]]) -> str:
    rows = snapshots(kind)
    if not rows:
        return f"no {kind} providers registered (register_inspectable({kind!r}, ...))"
    out: list[str] = []
    for name, snap in rows:
        if isinstance(snap, Exception):
            out.append(f"{name}: snapshot failed: {type(snap).__name__}: {snap}")
        else:
            out.extend(render(name, dict(snap)))
    return "\n".join(out)


def _offload_lines(name: str, snap: dict[str, Any]) -> list[str]:
    in_flight = snap.pop("in_flight", "?")
    oldest = snap.pop("oldest", None)
    age = f" (oldest {float(oldest):.1f}s)" if oldest is not None and in_flight else ""
    head = (
        f"{name}: in flight {in_flight}/{snap.pop('limit', '?')}{age}, "
        f"waiting {snap.pop('waiting', '?')}, sunk slots {snap.pop('sunk', '?')}"
    )
    if gone := snap.pop("callers_gone", 0):
        head += f", callers gone {gone}"
    if snap.pop("closed", False):
        head += ", closed"
    return [head + "".join(f", {k} {v}" for k, v in snap.items())]


def _lease_lines(name: str, snap: dict[str, Any]) -> list[str]:
    held = list(snap.get("held", ()))
    cap = f" (limit {snap['limit']})" if snap.get("limit") else ""
    out = [f"{name}: {len(held)} held by this worker{cap}"]
    for h in sorted(held, key=lambda h: -float(h.get("age", 0))):
        flags = "".join(f" {f}" for f in ("lost", "degraded") if h.get(f))
        out.append(f"  {h.get('holder', '?')}  age {float(h.get('age', 0)):.1f}s{flags}")
    return out


# --- aiomonitor glue (imported lazily) --------------------------------------------------

_commands_registered = False
#: aiomonitor's command decorators: they wrap a command callback, keeping its signature
_CommandDecorator = Callable[[Callable[..., None]], Callable[..., None]]
_monitor_cls: type | None = None


def _register_commands() -> None:
    global _commands_registered
    if _commands_registered:
        return
    import click
    from aiomonitor.termui import commands  # unannotated: typed views of what is used here

    monitor_cli = cast(click.Group, commands.monitor_cli)
    custom_help_option = cast("_CommandDecorator", commands.custom_help_option)
    auto_command_done = cast("_CommandDecorator", commands.auto_command_done)

    def _obj(ctx: click.Context) -> Any:
        mon = ctx.obj
        if not hasattr(mon, "corevo_health"):
            click.echo("not a corevo-obs monitor"
                       " (use corevo_obs.integrations.monitor.install_monitor)")
            return None
        return mon

    @monitor_cli.command(name="lag")
    @custom_help_option
    @auto_command_done
    def do_lag(ctx: click.Context) -> None:
        """Loop lag now, recent max, and whether the loop is frozen now"""
        if (mon := _obj(ctx)) is not None:
            click.echo(_fmt_lag(mon.corevo_health, mon.corevo_recent))

    @monitor_cli.command(name="stalls")
    @click.option("-n", "count", type=click.IntRange(1, 1000), default=5, show_default=True,
                  help="how many of the most recent reports")
    @custom_help_option
    @auto_command_done
    def do_stalls(ctx: click.Context, count: int) -> None:
        """Recent stall reports with their stacks"""
        if (mon := _obj(ctx)) is not None:
            click.echo(_fmt_stalls(mon.corevo_health, mon.corevo_native, count))

    @monitor_cli.command(name="offloads")
    @custom_help_option
    @auto_command_done
    def do_offloads(ctx: click.Context) -> None:
        """In-flight offload operations and sunk slots"""
        click.echo(_fmt_providers("offload", _offload_lines))

    @monitor_cli.command(name="leases")
    @custom_help_option
    @auto_command_done
    def do_leases(ctx: click.Context) -> None:
        """Leases this worker holds, oldest first"""
        click.echo(_fmt_providers("lease", _lease_lines))

    _commands_registered = True


def _check_host(host: str, allow_remote: bool) -> None:
    if allow_remote:
        return
    if host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise MonitorError(
            f"refusing to bind the monitor to {host!r}: aiomonitor is a live REPL into the "
            "worker (cancel tasks, send signals); bind 127.0.0.1 or pass allow_remote=True",
            source="install_monitor",
        )


def _check_port(host: str, label: str, port: int) -> None:
    # aiomonitor waits forever for a UI thread that died on a busy port: say it up front.
    if not 0 < port < 65536:
        raise MonitorError(f"{label} must be 1..65535, got {port}", source="install_monitor")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise MonitorError(
                f"cannot bind {host}:{port} ({label}): {exc.strerror}", source="install_monitor"
            ) from None


def install_monitor(
    health: LoopHealth,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    webui_port: int = DEFAULT_WEBUI_PORT,
    console_port: int = DEFAULT_CONSOLE_PORT,
    console: bool = False,
    allow_remote: bool = False,
    native: NativeStallCapture | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
) -> Any:
    """Start aiomonitor on ``loop`` (default: the running one) with the suite's commands.

    Call on the loop's thread. Returns the ``aiomonitor.Monitor``; ``close()`` it (or use
    it as a context manager) to stop. The Python console stays off unless ``console=True``.
    """
    _check_host(host, allow_remote)
    ports = {"port": port, "webui_port": webui_port}
    if console:
        ports["console_port"] = console_port
    for label, value in ports.items():
        _check_port(host, label, value)
    try:
        from aiomonitor import Monitor
    except ImportError:
        raise MonitorError(
            "aiomonitor is not installed: pip install 'corevo-obs[monitor]'",
            source="install_monitor",
        ) from None
    _register_commands()
    recent = RecentLag()
    health.sampler.add_listener(recent)
    mon = Monitor(
        loop or asyncio.get_running_loop(),
        host=host, termui_port=port, webui_port=webui_port,
        console_port=console_port, console_enabled=console,
    )
    mon.corevo_health = health
    mon.corevo_recent = recent
    mon.corevo_native = native
    mon.prompt = f"corevo[{health.worker}] >>> "
    mon.start()
    return mon
