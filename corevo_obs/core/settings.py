"""One settings resolver: keyword argument > environment > default, validated once.

A component declares its settings as a frozen dataclass whose fields carry an
``option(...)``; ``resolve(Cls, prefix, **kwargs)`` builds the immutable instance. Each
value is parsed by the field's annotation (``float``, ``int``, ``bool``, ``str``,
``tuple[str, ...]`` split on ``os.pathsep``, ``tuple[float, ...]`` split on commas (an
increasing sequence, e.g. bucket bounds), or ``X | None``), checked against its bounds,
and any error names where the value came from (``$COREVO_LOOP_INTERVAL: ...``,
``install_loop_health(interval=...): ...``), the pytest-timeout model. Every problem is
reported together, so a user fixes a config in one go. Explicit setup (a call the user
makes, a CLI) uses ``resolve`` and raises ``ConfigError``; code that runs inside a host
(server hooks, watchdog threads) uses ``resolve_in_host``, which counts and logs a bad
value once and goes on with its default.

>>> from dataclasses import dataclass
>>> @dataclass(frozen=True)
... class Probe:
...     interval: float = option(0.01, minimum=0.001, maximum=10)
...     enabled: bool = option(True)
>>> resolve(Probe, "COREVO_PROBE", environ={"COREVO_PROBE_ENABLED": "no"}, interval=0.5)
Probe(interval=0.5, enabled=False)
>>> resolve(Probe, "COREVO_PROBE", environ={"COREVO_PROBE_INTERVAL": "fast"})
Traceback (most recent call last):
...
corevo_obs.core.errors.ConfigError: $COREVO_PROBE_INTERVAL: cannot parse 'fast' as a number
"""

from __future__ import annotations

import dataclasses
import math
import os
import types
import typing
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import ConfigError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

__all__ = ["option", "resolve", "resolve_in_host"]

T = TypeVar("T")
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


def option(
    default: Any,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    env: bool = True,
    choices: tuple[str, ...] | None = None,
) -> Any:
    """A settings field: its default and bounds; ``env=False`` keeps it out of the
    environment (e.g. a registry object)."""
    meta = {"minimum": minimum, "maximum": maximum, "env": env, "choices": choices}
    if isinstance(default, list | dict | set):
        raise TypeError("use a tuple or frozenset default: settings are immutable")
    return dataclasses.field(default=default, metadata={"corevo": meta})


def resolve(
    cls: type[T],
    prefix: str,
    *,
    caller: str | None = None,
    environ: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> T:
    """Build ``cls`` from ``kwargs`` (None means "not given"), ``$PREFIX_NAME``, defaults."""
    values, problems = _collect(cls, prefix, caller, environ, kwargs)
    if problems:
        raise ConfigError("; ".join(problems)) if len(problems) > 1 else ConfigError(problems[0])
    return cls(**values)


def resolve_in_host(
    cls: type[T],
    prefix: str,
    *,
    component: str,
    caller: str | None = None,
    environ: Mapping[str, str] | None = None,
    worker: str = "unknown",
    registry: CollectorRegistry | None = None,
    **kwargs: Any,
) -> T:
    """``resolve`` for code that runs inside a host (a server hook, a watchdog thread),
    where raising would break the host: each bad value is counted under ``worker`` in
    ``registry`` (process-wide settings have no worker yet: "unknown") and logged once
    (``core.guard.absorb`` under ``component``) and its default used; the good ones stay.
    """
    values, problems = _collect(cls, prefix, caller, environ, kwargs)
    if problems:
        from .guard import absorb  # prometheus_client: only once something is wrong

        instead = " (the default is used instead)" if len(problems) == 1 else \
            " (the defaults are used instead)"
        absorb(component, ConfigError("; ".join(problems) + instead), worker=worker,
               registry=registry)
    return cls(**values)


def _collect(cls: type[Any], prefix: str, caller: str | None,
             environ: Mapping[str, str] | None,
             kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The values given and valid, and one message per problem (each naming its source)."""
    env = os.environ if environ is None else environ
    who = caller or cls.__name__
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    problems = [f"unknown option {k!r} (known: {', '.join(sorted(names))})"
                for k in kwargs if k not in names]
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        meta = f.metadata.get("corevo", {})
        key = f"{prefix}_{f.name.upper()}"
        try:
            if kwargs.get(f.name) is not None:
                values[f.name] = _check(f.name, kwargs[f.name], hints[f.name], meta,
                                        f"{who}({f.name}=...)", parse=False)
            elif meta.get("env", True) and env.get(key, "") != "":
                values[f.name] = _check(f.name, env[key], hints[f.name], meta, f"${key}",
                                        parse=True)
        except ConfigError as exc:
            problems.append(str(exc))
    return values, problems


def _check(name: str, raw: Any, hint: Any, meta: Mapping[str, Any], source: str, *,
           parse: bool) -> Any:
    kind, optional = _unwrap(hint)
    if optional and raw is None:
        return None
    try:
        value = _parse(raw, kind) if parse else _coerce(raw, kind)
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc), source=source) from None
    if isinstance(value, int | float) and not isinstance(value, bool):
        lo, hi = meta.get("minimum"), meta.get("maximum")
        if lo is not None and value < lo or hi is not None and value > hi:
            span = f"{lo if lo is not None else '-inf'}..{hi if hi is not None else 'inf'}"
            raise ConfigError(f"{value!r} is outside {span}", source=source)
    choices = meta.get("choices")
    if choices and value not in choices:
        raise ConfigError(f"{value!r} is not one of {', '.join(choices)}", source=source)
    return value


def _unwrap(hint: Any) -> tuple[Any, bool]:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else Any), True
    return hint, False


def _parse(raw: str, kind: Any) -> Any:
    """Text from the environment to a value of ``kind``."""
    text = raw.strip()
    if kind is bool:
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError(f"cannot parse {raw!r} as yes/no (1/0, true/false, on/off)")
    if kind is int:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"cannot parse {raw!r} as a whole number") from None
    if kind is float:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"cannot parse {raw!r} as a number") from None
        return _finite(value)
    if _numbers(kind):
        return _increasing(tuple(_parse(p, float) for p in text.replace(",", " ").split()))
    if typing.get_origin(kind) is tuple:
        return tuple(p for p in text.split(os.pathsep) if p)
    return raw


def _coerce(raw: Any, kind: Any) -> Any:
    """A keyword argument: the right type already (ints pass for floats), or an error."""
    if kind is bool:
        if not isinstance(raw, bool):
            raise TypeError(f"expected True or False, got {raw!r}")
        return raw
    if kind is int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise TypeError(f"expected a whole number, got {raw!r}")
        return raw
    if kind is float:
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise TypeError(f"expected a number, got {raw!r}")
        return _finite(float(raw))
    if typing.get_origin(kind) is tuple:
        if isinstance(raw, str | bytes) or not isinstance(raw, Iterable):
            what = "numbers" if _numbers(kind) else "strings"
            raise TypeError(f"expected a sequence of {what}, got {raw!r}")
        if _numbers(kind):
            return _increasing(tuple(_coerce(v, float) for v in raw))
        return tuple(raw)
    if kind is str and not isinstance(raw, str):
        raise TypeError(f"expected a string, got {raw!r}")
    return raw


def _numbers(kind: Any) -> bool:
    """``tuple[float, ...]``: a sequence of numbers (from the environment, comma- or
    space-separated)."""
    return typing.get_origin(kind) is tuple and typing.get_args(kind) == (float, Ellipsis)


def _increasing(values: tuple[float, ...]) -> tuple[float, ...]:
    """A non-empty, strictly increasing sequence of positive numbers (bucket bounds)."""
    if not values:
        raise ValueError("expected at least one number")
    if values[0] <= 0 or any(b <= a for a, b in zip(values, values[1:], strict=False)):
        raise ValueError(f"expected positive numbers in increasing order, got {values!r}")
    return values


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number, got {value!r}")
    return value
