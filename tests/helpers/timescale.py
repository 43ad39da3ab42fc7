"""One test-time factor for the shipped alert rules and Alertmanager config.

The alert matrix (tests/test_alert_matrix.py) runs every fault in minutes, not hours, by
dividing every *duration* the rules and the routing wait on by one factor: the range
selectors (``[15m]``, subqueries ``[10m:30s]``) and ``offset`` in each expression, each
rule's ``for:`` / ``keep_firing_for:``, and Alertmanager's ``group_wait``,
``group_interval`` and ``repeat_interval`` on every route. Nothing else changes: the
thresholds (a stall of 10 s, a heartbeat 30 s old), the aggregations and the routing
tree stay as shipped, so a scaled rule means what the shipped one means on a clock that
runs ``factor`` times faster.
"""

from __future__ import annotations

import re
from typing import Any

#: Prometheus' and Alertmanager's duration units
UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0,
         "y": 31536000.0}
_PART = r"\d+(?:ms|[smhdwy])"
_DURATION = rf"(?:{_PART})+"
_RANGE = re.compile(rf"\[\s*({_DURATION})\s*(?::\s*({_DURATION})?\s*)?\]")
_OFFSET = re.compile(rf"\boffset\s+({_DURATION})")
AM_WAITS = ("group_wait", "group_interval", "repeat_interval")


def seconds(text: str) -> float:
    """``"1h30m"`` -> 5400.0."""
    if not re.fullmatch(_DURATION, text.strip()):
        raise ValueError(f"not a duration: {text!r}")
    return sum(int(n) * UNITS[u] for n, u in re.findall(r"(\d+)(ms|[smhdwy])", text))


def render(value: float) -> str:
    """Seconds as a duration both Prometheus and Alertmanager parse (whole ms)."""
    ms = round(value * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def _scaled(text: str, factor: float) -> str:
    return render(seconds(text) / factor)


def scale_expr(expr: str, factor: float) -> str:
    """Every range selector, subquery step and offset of a PromQL expression divided."""
    def window(m: re.Match[str]) -> str:
        step = m.group(2)
        if ":" not in m.group(0):
            return f"[{_scaled(m.group(1), factor)}]"
        return f"[{_scaled(m.group(1), factor)}:{_scaled(step, factor) if step else ''}]"

    expr = _RANGE.sub(window, expr)
    return _OFFSET.sub(lambda m: f"offset {_scaled(m.group(1), factor)}", expr)


def scale_rules(doc: dict[str, Any], factor: float) -> dict[str, Any]:
    """A copy of a rule file (parsed YAML) with its durations divided by ``factor``."""
    out: dict[str, Any] = {"groups": []}
    for group in doc["groups"]:
        rules = []
        for rule in group["rules"]:
            rule = dict(rule)
            rule["expr"] = scale_expr(str(rule["expr"]), factor)
            for key in ("for", "keep_firing_for"):
                if key in rule:
                    rule[key] = _scaled(str(rule[key]), factor)
            rules.append(rule)
        out["groups"].append({**group, "rules": rules})
    return out


def rule_span(rule: dict[str, Any]) -> float:
    """Seconds a past event can still weigh on one rule: its longest range or offset
    plus its ``for:``."""
    expr = str(rule["expr"])
    spans = [seconds(m.group(1)) for m in _RANGE.finditer(expr)]
    spans += [seconds(m.group(1)) for m in _OFFSET.finditer(expr)]
    return max(spans, default=0.0) + seconds(str(rule.get("for", "0s")))


def rules_by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {str(r["alert"]): r for g in doc["groups"] for r in g["rules"] if "alert" in r}


def longest_window(doc: dict[str, Any]) -> float:
    """The longest ``rule_span`` of a rule file: "quiet past the longest window" means
    every rule has forgotten every fault."""
    return max((rule_span(r) for r in rules_by_name(doc).values()), default=0.0)


def scale_alertmanager(doc: dict[str, Any], factor: float) -> dict[str, Any]:
    """A copy of an Alertmanager config with every route's waits divided by ``factor``."""
    def route(node: dict[str, Any]) -> dict[str, Any]:
        node = dict(node)
        for key in AM_WAITS:
            if key in node:
                node[key] = _scaled(str(node[key]), factor)
        if "routes" in node:
            node["routes"] = [route(r) for r in node["routes"]]
        return node

    return {**doc, "route": route(doc["route"])}


def redirect_webhooks(doc: dict[str, Any], base: str) -> dict[str, Any]:
    """Every webhook receiver's URL pointed at ``base`` (scheme://host:port), its path
    kept: the one change the matrix makes to the example config besides the waits."""
    receivers = []
    for receiver in doc.get("receivers", []):
        receiver = dict(receiver)
        hooks = []
        for hook in receiver.get("webhook_configs", []):
            path = re.sub(r"^[a-z]+://[^/]+", "", str(hook["url"]))
            hooks.append({**hook, "url": f"{base}{path}"})
        if hooks:
            receiver["webhook_configs"] = hooks
        receivers.append(receiver)
    return {**doc, "receivers": receivers}
