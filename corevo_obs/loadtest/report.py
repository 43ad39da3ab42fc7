"""The run's report: one self-contained HTML file (inline SVG, no script, no network)
and the same data as JSON.

Plots: loop lag per worker over time (p99 per scrape interval, the maximum's bucket as a
band, stalls marked with their line and their cause when one is known), the heartbeat
and first-event probes against their idle baseline, the four stage histograms, offload
queue and rejections, and quota occupancy. A section whose series the app never wrote
says so instead of drawing an empty frame.
"""

from __future__ import annotations

import html
import json
import math
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import __version__
from ..core.fileio import write_files
from . import observe
from .driver import DriverResult
from .server import StallLine, Target
from .verdicts import Verdict
from .workload import Workload

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
           "#bcbd22", "#7f7f7f", "#d62728")
STALL_COLOR = "#d62728"


def build_report(*, app: str, workload: Workload, target: Target, scraper: observe.Scraper,
                 driver: DriverResult, stalls: list[StallLine], verdicts: list[Verdict],
                 workers: int, upstream_url: str) -> dict[str, Any]:
    """Everything the HTML shows, as plain data (times in seconds since the load started)."""
    t0 = driver.load_start
    end = scraper.marks.get("end")
    start = scraper.marks.get("load")
    a = end.samples if end else {}
    b = start.samples if start else {}
    snaps = scraper.snapshots
    rejected = observe.gauge_timeline(snaps, t0, "corevo_offload_rejected_total", "adapter")
    kill = dict(driver.kill) if driver.kill else None
    if kill and "at" in kill:
        kill["at"] = round(kill["at"] - t0, 3)
        if kill.get("replaced_at") is not None:
            kill["replaced_at"] = round(kill["replaced_at"] - t0, 3)
    return {
        "tool": f"corevo-obs {__version__} loadtest",
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "app": app, "served": target.served, "server": target.kind,
        "workers": workers if target.served else None,
        "workload": {"file": workload.source, "seed": workload.seed,
                     "duration_seconds": workload.duration_seconds,
                     "max_requests": workload.max_requests,
                     "baseline_seconds": workload.baseline_seconds,
                     "kill_worker_at_seconds": workload.kill_worker_at_seconds,
                     "plan_size": driver.plan_size, "plan_digest": driver.plan_digest,
                     "upstream": {"url": upstream_url,
                                  "latency_seconds": workload.upstream.latency_seconds,
                                  "body_bytes": workload.upstream.body_bytes},
                     "budgets": vars(workload.budgets)},
        "phases": {"baseline_start": round(driver.baseline_start - t0, 3), "load_start": 0.0,
                   "load_end": round(driver.load_end - t0, 3)},
        "verdicts": [v.as_dict() for v in verdicts],
        "failed": any(v.failed for v in verdicts),
        "mix": driver.by_entry(workload),
        "skipped_over_max_in_flight": driver.skipped,
        "lag_timeline": observe.lag_timeline(snaps, t0),
        "stalls": [{**s.as_dict(), "at_seconds": round(s.at - t0, 3)} for s in stalls[:500]],
        "probes": {
            name: [{"phase": s.phase, "at": round(s.at - t0, 3), "latency_seconds": s.latency,
                    "error": s.error} for s in samples]
            for name, samples in (("heartbeat", driver.heartbeat),
                                  ("first_event", driver.first_event))},
        "stages": observe.stage_histograms(a, b),
        "offload": {
            "present": observe.present(a, ("corevo_offload_limit", "corevo_offload_in_flight")),
            "waiting": observe.gauge_timeline(snaps, t0, "corevo_offload_waiting", "adapter"),
            "in_flight": observe.gauge_timeline(snaps, t0, "corevo_offload_in_flight",
                                                "adapter"),
            "rejected_cumulative": rejected,
        },
        "quota": {
            "present": observe.present(a, ("corevo_lease_held",)),
            "held": observe.gauge_timeline(snaps, t0, "corevo_lease_held", "quota"),
            "limit": observe.gauge_timeline(snaps, t0, "corevo_lease_limit", "quota"),
        },
        "kill": kill,
        "scrapes": {"count": len(snaps), "failures": scraper.failures,
                    "last_error": scraper.last_error, "url": target.metrics_url},
    }


def write_report(report: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    js = out_dir / "report.json"
    page = out_dir / "report.html"
    write_files([(js, (json.dumps(_finite(report), indent=1) + "\n").encode()),
                 (page, render_html(report).encode())])
    return page, js


def _finite(x: Any) -> Any:
    """Strict JSON: an infinite bound (a maximum beyond the last bucket) becomes null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): _finite(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_finite(v) for v in x]
    return x


# --- HTML --------------------------------------------------------------------------
# The page's only script: a legend entry hides or shows its series (no data, no network).
_JS = """
document.querySelectorAll("[data-series]").forEach(function (item) {
  item.style.cursor = "pointer";
  item.addEventListener("click", function () {
    var off = item.getAttribute("opacity") === "0.35";
    item.setAttribute("opacity", off ? "1" : "0.35");
    document.querySelectorAll("." + item.getAttribute("data-series")).forEach(function (el) {
      el.style.display = off ? "" : "none";
    });
  });
});
"""
_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:24px;color:#222;max-width:1180px}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px}
.meta{color:#555} table{border-collapse:collapse;margin:6px 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3} .passed{background:#e5f5e0} .failed{background:#fde0dd}
.ne{background:#f0f0f0;color:#555} .grid{display:flex;flex-wrap:wrap;gap:12px}
svg{background:#fff;border:1px solid #ddd} .note{color:#666;font-style:italic}
.big{font-size:16px;font-weight:600;padding:8px;margin:8px 0}
"""


def render_html(r: dict[str, Any]) -> str:
    e = html.escape
    w = r["workload"]
    workers = f" × {r['workers']} workers" if r["workers"] else ""
    head = (f"<h1>corevo-obs load test: {e(r['app'])}</h1><div class=meta>"
            f"{e(r['tool'])} · {e(r['generated_at'])} · workload {e(str(w['file']))} · seed "
            f"{w['seed']} · plan {w['plan_size']} requests (digest {e(w['plan_digest'])}) · "
            f"{w['duration_seconds']:g} s load after {w['baseline_seconds']:g} s idle · "
            f"server {e(str(r['server']))}{workers}</div>")
    verdict = ("<div class='big failed'>a budget is broken</div>" if r["failed"]
               else "<div class='big passed'>all budgets held</div>")
    rows = "".join(
        f"<tr class={'ne' if v['status'] == 'not exercised' else v['status']}>"
        f"<td>{e(v['name'])}</td><td>{e(v['status'])}</td><td>{e(v['message'])}</td>"
        f"<td>{e(v['worker'] or '')}</td><td>{e(v['where'] or '')}</td>"
        f"<td>{e(v['cause'] or 'not attributed')}</td></tr>" for v in r["verdicts"])
    table = ("<table><tr><th>verdict</th><th>status</th><th>what</th><th>worker</th>"
             f"<th>line</th><th>cause</th></tr>{rows}</table>")
    parts = [head, verdict, table,
             "<h2>Loop lag per worker</h2>", _lag_chart(r),
             "<h2>Heartbeat and first event, idle baseline vs. under load</h2>",
             _probe_chart(r),
             "<h2>Task stages (load phase, all kinds)</h2>", _stage_charts(r),
             "<h2>Offload queue and rejections</h2>", _offload_chart(r),
             "<h2>Quota occupancy</h2>", _quota_chart(r),
             "<h2>Requests by mix entry</h2>", _mix_table(r),
             "<h2>Stalls logged by the workers</h2>", _stall_table(r),
             "<h2>Worker kill</h2>", _kill_text(r)]
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content='width=device-width'>"
            f"<title>load test: {e(r['app'])}</title>"
            f"<style>{_CSS}</style></head><body>{''.join(parts)}<script>{_JS}</script>"
            "</body></html>\n")


class _Chart:
    """A small SVG plot area with a linear x axis and a linear or log y axis."""

    def __init__(self, *, width: int, height: int, x0: float, x1: float, y0: float,
                 y1: float, log: bool, ylabel: str, xlabel: str = "seconds since load start"):
        self.w, self.h = width, height
        self.left, self.right, self.top, self.bottom = 62, 14, 14, 38
        self.x0, self.x1 = x0, x1 if x1 > x0 else x0 + 1
        self.log = log
        self.y0, self.y1 = (math.log10(y0), math.log10(y1)) if log else (y0, y1)
        if self.y1 <= self.y0:
            self.y1 = self.y0 + 1
        self.parts: list[str] = []
        self.ylabel, self.xlabel = ylabel, xlabel

    def x(self, v: float) -> float:
        span = self.w - self.left - self.right
        return self.left + span * (v - self.x0) / (self.x1 - self.x0)

    def y(self, v: float) -> float:
        if self.log:
            v = math.log10(max(v, 10 ** self.y0))
        v = min(max(v, self.y0), self.y1)
        span = self.h - self.top - self.bottom
        return self.top + span * (1 - (v - self.y0) / (self.y1 - self.y0))

    def axes(self, yticks: Sequence[float], fmt: str = "{:g}") -> None:
        p = self.parts
        p.append(f"<rect x={self.left} y={self.top} width={self.w - self.left - self.right} "
                 f"height={self.h - self.top - self.bottom} fill=none stroke='#999'/>")
        for t in yticks:
            yy = self.y(t)
            p.append(f"<line x1={self.left} x2={self.w - self.right} y1={yy:.1f} y2={yy:.1f} "
                     "stroke='#eee'/>")
            p.append(f"<text x={self.left - 5} y={yy + 4:.1f} text-anchor=end font-size=11>"
                     f"{fmt.format(t)}</text>")
        for t in _nice_ticks(self.x0, self.x1):
            xx = self.x(t)
            p.append(f"<line x1={xx:.1f} x2={xx:.1f} y1={self.h - self.bottom} "
                     f"y2={self.h - self.bottom + 4} stroke='#999'/>")
            p.append(f"<text x={xx:.1f} y={self.h - self.bottom + 16} text-anchor=middle "
                     f"font-size=11>{t:g}</text>")
        p.append(f"<text x={(self.left + self.w - self.right) / 2:.0f} y={self.h - 6} "
                 f"text-anchor=middle font-size=11 fill='#555'>{self.xlabel}</text>")
        p.append(f"<text x=12 y={(self.top + self.h - self.bottom) / 2:.0f} font-size=11 "
                 f"fill='#555' text-anchor=middle transform='rotate(-90 12 "
                 f"{(self.top + self.h - self.bottom) / 2:.0f})'>{html.escape(self.ylabel)}"
                 "</text>")

    def vline(self, at: float, label: str, color: str = "#555", row: int = 0) -> None:
        if not self.x0 <= at <= self.x1:
            return
        xx = self.x(at)
        self.parts.append(f"<line x1={xx:.1f} x2={xx:.1f} y1={self.top} "
                          f"y2={self.h - self.bottom} stroke='{color}' stroke-dasharray='4 3'/>")
        self.parts.append(f"<text x={xx + 3:.1f} y={self.top + 11 + 13 * row} font-size=11 "
                          f"fill='{color}'>{html.escape(label)}</text>")

    def shade(self, a: float, b: float, label: str) -> None:
        xa, xb = self.x(max(a, self.x0)), self.x(min(b, self.x1))
        if xb <= xa:
            return
        self.parts.append(f"<rect x={xa:.1f} y={self.top} width={xb - xa:.1f} "
                          f"height={self.h - self.top - self.bottom} fill='#f4f4f4'/>")
        self.parts.append(f"<text x={xa + 3:.1f} y={self.h - self.bottom - 5} font-size=11 "
                          f"fill='#888'>{html.escape(label)}</text>")

    def line(self, pts: Sequence[tuple[float, float]], color: str, title: str,
             width: float = 1.8, dash: str = "", series: str = "") -> None:
        if not pts:
            return
        d = " ".join(f"{self.x(x):.1f},{self.y(y):.1f}" for x, y in pts)
        extra = f" stroke-dasharray='{dash}'" if dash else ""
        extra += f" class='{series}'" if series else ""
        self.parts.append(f"<polyline points='{d}' fill=none stroke='{color}' "
                          f"stroke-width={width}{extra}><title>{html.escape(title)}</title>"
                          "</polyline>")

    def dot(self, x: float, y: float, color: str, title: str, r: float = 2.5,
            shape: str = "circle", series: str = "") -> None:
        xx, yy = self.x(x), self.y(y)
        t = f"<title>{html.escape(title)}</title>"
        cls = f" class='{series}'" if series else ""
        if shape == "triangle":
            self.parts.append(f"<polygon points='{xx:.1f},{yy - 6:.1f} {xx - 5:.1f},"
                              f"{yy + 4:.1f} {xx + 5:.1f},{yy + 4:.1f}' fill='{color}'{cls}>"
                              f"{t}</polygon>")
        else:
            self.parts.append(f"<circle cx={xx:.1f} cy={yy:.1f} r={r} fill='{color}'{cls}>{t}"
                              "</circle>")

    def legend(self, items: Sequence[tuple[str, str]], series: Sequence[str] = ()) -> None:
        """Entries at the top left; with ``series`` (CSS classes) a click toggles each."""
        x = self.left + 8
        for i, (label, color) in enumerate(items):
            toggle = f" data-series='{series[i]}'" if i < len(series) and series[i] else ""
            self.parts.append(f"<g{toggle}><rect x={x} y={self.top + 18} width=10 height=10 "
                              f"fill='{color}'/><text x={x + 14} y={self.top + 27} "
                              f"font-size=11>{html.escape(label)}</text></g>")
            x += 18 + 7 * len(label)

    def svg(self, label: str) -> str:
        return (f"<svg xmlns='http://www.w3.org/2000/svg' width={self.w} height={self.h} "
                f"role=img aria-label='{html.escape(label)}'>{''.join(self.parts)}</svg>")


def _nice_ticks(a: float, b: float, n: int = 8) -> list[float]:
    span = b - a
    step = 10 ** math.floor(math.log10(span / n)) if span > 0 else 1
    for mult in (1, 2, 5, 10):
        if span / (step * mult) <= n:
            step *= mult
            break
    first = math.ceil(a / step) * step
    return [round(first + i * step, 6) for i in range(int((b - first) / step) + 1)]


_LAG_TICKS = (0.001, 0.01, 0.1, 1.0)


def _time_range(r: dict[str, Any]) -> tuple[float, float]:
    ph = r["phases"]
    return ph["baseline_start"], max(ph["load_end"], 1.0)


def _common(c: _Chart, r: dict[str, Any]) -> None:
    c.shade(r["phases"]["baseline_start"], 0.0, "idle baseline")
    c.vline(0.0, "load starts")
    kill = r.get("kill") or {}
    if kill.get("at") is not None and kill.get("killed_pid"):
        c.vline(kill["at"], f"SIGKILL {kill.get('worker') or ''}", STALL_COLOR)
        if kill.get("replaced_at") is not None:
            c.vline(kill["replaced_at"], "replaced", "#2ca02c", row=1)


def _lag_chart(r: dict[str, Any]) -> str:
    x0, x1 = _time_range(r)
    c = _Chart(width=1100, height=330, x0=x0, x1=x1, y0=0.0005, y1=3.0, log=True,
               ylabel="loop lag (s, log)")
    _common(c, r)
    c.axes(_LAG_TICKS)
    legend, classes = [], []
    for i, (worker, rows) in enumerate(sorted(r["lag_timeline"].items())):
        color, cls = PALETTE[i % len(PALETTE)], f"w{i}"
        legend.append((f"{worker} p99 (dot: max bucket)", color))
        classes.append(cls)
        pts = [(row["at"], row["p99_seconds"]) for row in rows if row["p99_seconds"] is not None]
        c.line(pts, color, f"{worker}: lag p99 per scrape interval", series=cls)
        for row in rows:
            if row["max_over_seconds"] and row["max_over_seconds"] >= 0.05:
                hi = row["max_at_most_seconds"] or 3.0
                c.dot(row["at"], hi, color, f"{worker} at {row['at']} s: max lag in "
                      f"({row['max_over_seconds']}, {hi}] s", r=3, series=cls)
    for s in r["stalls"]:
        cause = s.get("cause") or "cause not attributed"
        c.dot(s["at_seconds"], s["duration_seconds"], STALL_COLOR,
              f"stall {s['worker']} {s['duration_seconds']:.3f} s at {s['where']} "
              f"({s['function'] or '?'}); {cause}", shape="triangle", series="stall")
    legend.append(("stall (hover: line, cause)", STALL_COLOR))
    classes.append("stall")
    c.legend(legend, classes)
    if not r["lag_timeline"]:
        c.parts.append("<text x=300 y=150 font-size=14 fill='#888'>no lag samples were read"
                       "</text>")
    return c.svg("loop lag per worker over time")


def _probe_chart(r: dict[str, Any]) -> str:
    x0, x1 = _time_range(r)
    c = _Chart(width=1100, height=260, x0=x0, x1=x1, y0=0.0005, y1=3.0, log=True,
               ylabel="probe latency (s, log)")
    _common(c, r)
    c.axes(_LAG_TICKS)
    colors = {"heartbeat": "#1f77b4", "first_event": "#ff7f0e"}
    for name, samples in r["probes"].items():
        for s in samples:
            if s["latency_seconds"] is not None:
                c.dot(s["at"], s["latency_seconds"], colors[name],
                      f"{name} at {s['at']} s: {s['latency_seconds'] * 1000:.1f} ms", r=2)
            else:
                c.dot(s["at"], 2.5, STALL_COLOR, f"{name} failed: {s['error']}", r=3)
    c.legend([("heartbeat", colors["heartbeat"]), ("first event", colors["first_event"]),
              ("failed probe", STALL_COLOR)])
    return c.svg("heartbeat and first-event probe latency")


def _stage_charts(r: dict[str, Any]) -> str:
    out = []
    for stage, data in r["stages"].items():
        buckets = data["buckets"]
        prev, bars = 0, []
        for le, cum in buckets:
            bars.append((le, max(0, cum - prev)))
            prev = cum
        c = _Chart(width=540, height=220, x0=0, x1=max(1, len(bars)), y0=0,
                   y1=max([n for _, n in bars] + [1]) * 1.1, log=False,
                   ylabel="requests", xlabel="bucket upper bound (s)")
        c.axes(_nice_ticks(0, max([n for _, n in bars] + [1]) * 1.05, 4), "{:g}")
        c.parts = [p for p in c.parts if "text-anchor=middle font-size=11>" not in p
                   or "bucket" in p]  # x ticks are bucket labels, not numbers
        for i, (le, n) in enumerate(bars):
            xa, xb = c.x(i + 0.1), c.x(i + 0.9)
            ya = c.y(n)
            c.parts.append(f"<rect x={xa:.1f} y={ya:.1f} width={xb - xa:.1f} "
                           f"height={c.y(0) - ya:.1f} fill='#4c78a8'><title>≤ {le} s: {n}"
                           "</title></rect>")
            c.parts.append(f"<text x={(xa + xb) / 2:.1f} y={c.h - c.bottom + 14} "
                           f"font-size=9 text-anchor=middle>{le}</text>")
        s = data["summary"]
        label = (f"{stage}: {s['count']} samples, p50 {_ms(s['p50_seconds'])}, "
                 f"p99 {_ms(s['p99_seconds'])}")
        c.parts.append(f"<text x={c.left + 6} y={c.top + 14} font-size=12>"
                       f"{html.escape(label)}</text>")
        if not buckets:
            c.parts.append(f"<text x=200 y=110 font-size=13 fill='#888'>no {stage} samples"
                           "</text>")
        out.append(c.svg(f"{stage} histogram"))
    return f"<div class=grid>{''.join(out)}</div>"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v * 1000:.1f} ms"


def _timeline_chart(r: dict[str, Any], series: list[tuple[str, list[Any], str]],
                    ylabel: str, label: str) -> str:
    x0, x1 = _time_range(r)
    top = max([v for _, pts, _ in series for _, v in pts] + [1.0])
    c = _Chart(width=1100, height=220, x0=x0, x1=x1, y0=0, y1=top * 1.15, log=False,
               ylabel=ylabel)
    _common(c, r)
    c.axes(_nice_ticks(0, top * 1.1, 4))
    for name, pts, color in series:
        c.line([tuple(p) for p in pts], color, name)
    c.legend([(name, color) for name, _, color in series])
    return c.svg(label)


def _offload_chart(r: dict[str, Any]) -> str:
    off = r["offload"]
    if not off["present"]:
        return ("<p class=note>not exercised: the app reported no offload adapter "
                "(no corevo_offload_* series).</p>")
    series = []
    for i, (adapter, pts) in enumerate(sorted(off["waiting"].items())):
        series.append((f"{adapter} waiting", pts, PALETTE[i % len(PALETTE)]))
    for i, (adapter, pts) in enumerate(sorted(off["in_flight"].items())):
        series.append((f"{adapter} in flight", pts, PALETTE[(i + 3) % len(PALETTE)]))
    for adapter, pts in sorted(off["rejected_cumulative"].items()):
        series.append((f"{adapter} rejected (cumulative)", pts, STALL_COLOR))
    return _timeline_chart(r, series, "callers", "offload queue and rejections")


def _quota_chart(r: dict[str, Any]) -> str:
    q = r["quota"]
    if not q["present"]:
        return ("<p class=note>not exercised: the app holds no leases (no corevo_lease_held "
                "series).</p>")
    series = []
    for i, (quota, pts) in enumerate(sorted(q["held"].items())):
        color = PALETTE[i % len(PALETTE)]
        series.append((f"{quota} held", pts, color))
        if quota in q["limit"]:
            series.append((f"{quota} limit", q["limit"][quota], "#999"))
    return _timeline_chart(r, series, "leases", "quota occupancy")


def _mix_table(r: dict[str, Any]) -> str:
    e = html.escape
    rows = "".join(
        f"<tr><td>{e(name)}</td><td>{e(m['kind'])}</td><td>{e(m['path'])}</td>"
        f"<td>{m['rate']:g}/s</td><td>{m['sent']}</td>"
        f"<td>{e(', '.join(f'{k} {v}' for k, v in m['outcomes'].items()))}</td>"
        f"<td>{_ms(m['latency_p50_seconds'])}</td><td>{_ms(m['latency_p99_seconds'])}</td></tr>"
        for name, m in r["mix"].items())
    skipped = r["skipped_over_max_in_flight"]
    note = f"<p class=note>{skipped} planned requests skipped (max_in_flight)</p>" if skipped \
        else ""
    return ("<table><tr><th>entry</th><th>kind</th><th>path</th><th>rate</th><th>sent</th>"
            f"<th>outcomes</th><th>p50 (ok)</th><th>p99 (ok)</th></tr>{rows}</table>{note}")


def _stall_table(r: dict[str, Any]) -> str:
    e = html.escape
    if not r["stalls"]:
        return "<p class=note>none logged.</p>"
    rows = "".join(
        f"<tr><td>{s['at_seconds']:.2f}</td><td>{e(s['worker'])}</td>"
        f"<td>{s['duration_seconds']:.3f} s</td><td>{e(s['where'])}</td>"
        f"<td>{e(s['function'] or '')}</td><td>{e(s.get('cause') or 'not attributed')}</td></tr>"
        for s in r["stalls"][:100])
    return ("<table><tr><th>at (s)</th><th>worker</th><th>duration</th><th>line</th>"
            f"<th>function</th><th>cause</th></tr>{rows}</table>")


def _kill_text(r: dict[str, Any]) -> str:
    k = r.get("kill")
    if not k:
        return "<p class=note>no worker was killed in this run.</p>"
    if not k.get("killed_pid"):
        return f"<p class=note>{html.escape(str(k.get('reason')))}</p>"
    back = (f"replaced by pid {k.get('new_pid')} as {k.get('new_worker')} after "
            f"{k['replaced_after_seconds']:.2f} s" if k.get("replaced_after_seconds") is not None
            else "no replacement seen")
    return (f"<p>worker {html.escape(str(k.get('worker')))} (pid {k['killed_pid']}) got "
            f"SIGKILL at {k['at']:.2f} s; {html.escape(back)}.</p>")
