"""``@blocking``: declare that a sync function blocks, for the lint and the test-time guard.

At run time the marker costs nothing: it returns the very function it was given, with an
attribute set once at import. The blocking-call lint treats calls to marked functions
inside ``async def`` like calls to ``open()``.

The guard (off unless ``$COREVO_BLOCKING_GUARD=1``, ``enable_guard()`` or the pytest flag
``--corevo-blocking-guard``) is decided at decoration time: functions marked while it is
on are wrapped so that a call on a thread that runs an event loop raises
``BlockingCallError``. Modules imported earlier can be wrapped with ``guard_module``.

``$COREVO_BLOCKING_GUARD`` is read once, at the first use (the first ``@blocking`` or
``guard_enabled()``), by the settings resolver, never at import: a host's import cannot
fail on it. A bad value (``COREVO_BLOCKING_GUARD=maybe``) is not taken as "off": every
call of a function marked meanwhile, and ``guard_enabled()``, raise a ``ConfigError``
naming the variable, until the variable is fixed or ``enable_guard()`` decides.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any, TypeVar

from .errors import ConfigError, CorevoObsError

__all__ = [
    "BlockingCallError",
    "blocking",
    "enable_guard",
    "guard_enabled",
    "guard_module",
    "is_blocking",
]


F = TypeVar("F", bound=Callable[..., object])

MARKER_ATTR = "__corevo_blocking__"
GUARD_ENV = "COREVO_BLOCKING_GUARD"
_GUARDED_ATTR = "__corevo_guarded__"
#: None until the first use reads $COREVO_BLOCKING_GUARD (or ``enable_guard`` decides)
_guard_on: bool | None = None
#: what was wrong with $COREVO_BLOCKING_GUARD; raised at each use until it is decided
_guard_error: str | None = None


class BlockingCallError(CorevoObsError):
    """A function marked ``@blocking`` was called on an event loop's thread (guard on)."""

    def __init__(self, function: str) -> None:
        self.function = function
        super().__init__(
            f"blocking call {function}() on the event loop thread (marked @blocking): "
            "offload it, e.g. await asyncio.to_thread(...)"
        )


def blocking(func: F) -> F:
    """Mark ``func`` as blocking (file, network, DB or subprocess I/O, or long CPU)."""
    try:
        setattr(func, MARKER_ATTR, True)
    except (AttributeError, TypeError):  # builtins and slotted callables: lint-only marker
        return func
    on = _guard_state()
    if on is None:  # a bad $COREVO_BLOCKING_GUARD: its ConfigError comes at the first call
        return _guarded(func, deferred=True)
    return _guarded(func) if on else func


def enable_guard(on: bool = True) -> None:
    """Wrap functions marked from now on (tests: the pytest plugin calls this early)."""
    global _guard_on, _guard_error
    _guard_on, _guard_error = on, None


def guard_enabled() -> bool:
    """Whether the guard is on; a bad ``$COREVO_BLOCKING_GUARD`` raises ``ConfigError``."""
    on = _guard_state()
    if on is None:
        raise ConfigError(_guard_error or "undecided", source=f"${GUARD_ENV}")
    return on


def _guard_state() -> bool | None:
    """The guard's setting, read from the environment at the first use only."""
    global _guard_on, _guard_error
    if _guard_on is None and _guard_error is None:
        if os.environ.get(GUARD_ENV, "") == "":  # unset: the default, without the resolver
            _guard_on = False
        else:
            try:
                _guard_on = _guard_from_env()
            except ConfigError as exc:
                _guard_error = str(exc).removeprefix(f"${GUARD_ENV}: ")
    return _guard_on


def _guard_from_env() -> bool:
    # The resolver (and dataclasses) load here, not at import: the marker is imported by
    # hosts' modules and must stay cheap (bench/import_bench.py).
    from dataclasses import dataclass

    from .settings import option, resolve

    @dataclass(frozen=True)
    class Blocking:
        guard: bool = option(False)

    return resolve(Blocking, "COREVO_BLOCKING").guard


def _guarded(func: F, *, deferred: bool = False) -> F:
    if inspect.iscoroutinefunction(func) or getattr(func, _GUARDED_ATTR, False):
        return func
    name = f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', func)}"

    @functools.wraps(func)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        # deferred: the guard was undecided when ``func`` was marked; ask now (and raise
        # the ConfigError while $COREVO_BLOCKING_GUARD stays bad)
        if (not deferred or guard_enabled()) and asyncio._get_running_loop() is not None:
            raise BlockingCallError(name)
        return func(*args, **kwargs)

    setattr(guarded, _GUARDED_ATTR, True)
    return guarded  # type: ignore[return-value]


def guard_module(module: ModuleType) -> int:
    """Wrap the marked functions (and methods of classes) defined in an imported module.

    For modules imported before the guard was turned on; returns how many were wrapped.
    """
    count = 0
    spaces: list[Any] = [module]
    spaces += [v for v in vars(module).values() if isinstance(v, type)]
    for space in spaces:
        for key, value in list(vars(space).items()):
            target = value.__func__ if isinstance(value, staticmethod) else value
            if getattr(target, "__module__", None) != module.__name__ or not is_blocking(target):
                continue
            wrapped = _guarded(target)
            if wrapped is not target:
                setattr(space, key, staticmethod(wrapped) if target is not value else wrapped)
                count += 1
    return count


def is_blocking(func: object) -> bool:
    return bool(getattr(func, MARKER_ATTR, False))
