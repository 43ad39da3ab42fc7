"""Which asyncio task held a stalled loop, and the trace it was serving.

Read from the watchdog thread while the loop is stuck: ``asyncio.current_task(loop)``
is the task whose step is running (None for a plain callback). Only names leave the
task: its name and its coroutine's qualified name, both bounded; never a local.

The trace: the task's ``contextvars.Context`` holds OpenTelemetry's current context,
whose span is the request the task serves. The context is read without entering it (it
is entered on the loop thread right now): ``Task.get_context()`` from Python 3.12, the
context object the task refers to before that. OpenTelemetry is looked up only in
``sys.modules``: a host that never imported it pays nothing and imports nothing.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import sys
from dataclasses import dataclass
from typing import Any, Final

MAX_NAME: Final = 120


@dataclass(frozen=True)
class HeldTask:
    """The task that held the loop: names only, bounded, and its trace when one is on."""

    name: str
    coroutine: str
    trace_id: str | None = None
    span_id: str | None = None

    def __str__(self) -> str:
        trace = f", trace {self.trace_id} span {self.span_id}" if self.trace_id else ""
        return f"task {self.name!r} running {self.coroutine}{trace}"

    def as_dict(self) -> dict[str, str | None]:
        return {"name": self.name, "coroutine": self.coroutine,
                "trace_id": self.trace_id, "span_id": self.span_id}


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_NAME else text[:MAX_NAME - 1] + "…"


def _coroutine_name(task: asyncio.Task[Any]) -> str:
    coro = task.get_coro()
    name = getattr(coro, "__qualname__", None)
    return name if isinstance(name, str) else type(coro).__qualname__


def _context_of(task: asyncio.Task[Any]) -> contextvars.Context | None:
    getter = getattr(task, "get_context", None)  # Python 3.12+
    if getter is not None:
        ctx = getter()
        return ctx if isinstance(ctx, contextvars.Context) else None
    ctx = getattr(task, "_context", None)  # the pure-Python Task
    if isinstance(ctx, contextvars.Context):
        return ctx
    return next((r for r in gc.get_referents(task) if isinstance(r, contextvars.Context)),
                None)  # the C Task of 3.11: its context is among what it refers to


def _trace_of(task: asyncio.Task[Any]) -> tuple[str, str] | None:
    """(trace id, span id) in hex of the span current in the task, if OTel is on."""
    trace = sys.modules.get("opentelemetry.trace")
    otel_context = sys.modules.get("opentelemetry.context.context")
    if trace is None or otel_context is None:
        return None
    ctx = _context_of(task)
    if ctx is None:
        return None
    for value in ctx.values():
        if isinstance(value, otel_context.Context):
            span_context = trace.get_current_span(value).get_span_context()
            if span_context.is_valid:
                return (trace.format_trace_id(span_context.trace_id),
                        trace.format_span_id(span_context.span_id))
    return None


def held_task(loop: asyncio.AbstractEventLoop) -> HeldTask | None:
    """The task running on ``loop`` now (callable from any thread), or None."""
    task = asyncio.current_task(loop)
    if task is None:
        return None
    ids = _trace_of(task)
    return HeldTask(
        name=_bounded(task.get_name()),
        coroutine=_bounded(_coroutine_name(task)),
        trace_id=None if ids is None else ids[0],
        span_id=None if ids is None else ids[1],
    )
