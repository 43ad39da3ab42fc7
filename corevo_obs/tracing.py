"""OpenTelemetry spans for task stages, paid for only when a real tracer provider exists.

The OTel API is not free without an SDK (about 8 µs per task for a span, events and a
child span), so the decision is made once, when a ``StageRecorder`` is built: no
provider configured means no OTel call at all per task. ``opentelemetry`` is never
imported here; if the host has not imported it, nobody can have configured a provider.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

TRACER_NAME = "corevo_obs"
TASK_SPAN = "corevo_task"
EXTERNAL_SPAN = "corevo_task_external"
AttributeValue = str | bool | int | float


def resolve_tracer(provider: Any | None = None) -> Any | None:
    """A tracer from ``provider`` or the global provider, or None when tracing is off.

    The API's proxy and no-op providers count as "off": spans made through them are
    dropped anyway, and making them still costs microseconds per task.
    """
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    if provider is None:
        provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider.get_tracer(TRACER_NAME)


class TaskSpan:
    """One task span; stage marks become its events, external waits its children."""

    __slots__ = ("_span", "_tracer", "_ctx")

    def __init__(
        self,
        tracer: Any,
        *,
        kind: str,
        worker: str,
        start_ns: int,
        attributes: Mapping[str, AttributeValue],
    ) -> None:
        from opentelemetry import trace

        attrs: dict[str, AttributeValue] = {"corevo.task.kind": kind, "corevo.worker": worker}
        attrs.update(attributes)
        self._tracer = tracer
        self._span = tracer.start_span(TASK_SPAN, attributes=attrs, start_time=start_ns)
        self._ctx = trace.set_span_in_context(self._span)

    @property
    def span(self) -> Any:
        return self._span

    def exemplar(self) -> dict[str, str] | None:
        """The span's ids as the stage histograms' exemplar labels (OpenMetrics: the
        scrape links a bucket to this trace), or None for an invalid span context."""
        ctx = self._span.get_span_context()
        if not ctx.is_valid:
            return None
        return {"trace_id": f"{ctx.trace_id:032x}", "span_id": f"{ctx.span_id:016x}"}

    def event(self, name: str, at_ns: int, seconds: float) -> None:
        self._span.add_event(name, {"corevo.seconds": seconds}, timestamp=at_ns)

    def start_external(self, dependency: str, at_ns: int) -> Any:
        return self._tracer.start_span(
            EXTERNAL_SPAN, context=self._ctx,
            attributes={"corevo.dependency": dependency}, start_time=at_ns,
        )

    @staticmethod
    def end_external(child: Any, at_ns: int, exc: BaseException | None) -> None:
        if exc is not None:
            _mark_error(child, exc)
        child.end(end_time=at_ns)

    def end(self, outcome: str, at_ns: int, seconds: float) -> None:
        self._span.set_attribute("corevo.task.outcome", outcome)
        self._span.add_event("finished", {"corevo.seconds": seconds}, timestamp=at_ns)
        if outcome != "completed":
            from opentelemetry.trace import Status, StatusCode

            self._span.set_status(Status(StatusCode.ERROR, outcome))
        self._span.end(end_time=at_ns)


def _mark_error(span: Any, exc: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
