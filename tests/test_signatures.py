"""Every option is in the signature it applies to: no public constructor, function or
method of a namespace in docs/api.md takes ``**kwargs`` / ``**options`` (so ``help()``
and an IDE show every option, and a misspelt one is a ``TypeError`` at the call), except
the few listed here with the reason.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from corevo_obs.core.errors import ConfigError
from corevo_obs.leases import CircuitBreaker, RedisLeaseStore, SqliteLeaseStore
from corevo_obs.loop import LoopHealthConfig, install_loop_health

ROOT = Path(__file__).resolve().parent.parent

#: "module.Qualified.name" -> why its ``**`` parameter stays
ALLOWED: dict[str, str] = {
    "corevo_obs.offload.OffloadAdapter.run":
        "forwards the caller's function's own keywords (P.kwargs), not options",
    "corevo_obs.stages.TaskStages.__init__":
        "refuses any call with a TypeError saying to use StageRecorder.task()",
    "corevo_obs.loop.health.LoopHealthConfig.resolve":
        "the keywords are the dataclass's own fields (its signature shows them); "
        "install_loop_health names each one",
    "corevo_obs.core.settings.resolve":
        "builds any settings class: the keywords are that class's fields",
    "corevo_obs.core.settings.resolve_in_host":
        "builds any settings class: the keywords are that class's fields",
    "corevo_obs.otel.export.CountedExporter.export":
        "the SDK's MetricExporter.export signature: its keywords go to the wrapped exporter",
    "corevo_obs.otel.export.CountedExporter.shutdown":
        "the SDK's MetricExporter.shutdown signature: its keywords go to the wrapped exporter",
}


def _namespaces() -> dict[str, list[str]]:
    """The namespaces and names of docs/api.md's "Every public name" tables."""
    from tests.test_api_reference import documented_purposes

    return {module: list(rows) for module, rows in documented_purposes().items()}


def _ours(obj: object) -> bool:
    return str(getattr(obj, "__module__", "")).startswith("corevo_obs")


def _callables() -> Iterator[tuple[str, Callable[..., Any]]]:
    """(qualified name, callable) for every public function, constructor and method
    defined in corevo_obs, each once."""
    seen: set[int] = set()
    for module, names in _namespaces().items():
        mod = importlib.import_module(module)
        for name in names:
            obj = getattr(mod, name)
            if id(obj) in seen or not _ours(obj):
                continue
            seen.add(id(obj))
            if inspect.isclass(obj):
                where = f"{obj.__module__}.{obj.__qualname__}"
                for attr, member in vars(obj).items():
                    if attr.startswith("_") and attr != "__init__":
                        continue
                    if isinstance(member, staticmethod | classmethod):
                        member = member.__func__
                    if inspect.isfunction(member) and id(member) not in seen:
                        seen.add(id(member))
                        yield f"{where}.{attr}", member
                # an inherited (private base's) constructor is the class's own signature
                init = obj.__init__
                if inspect.isfunction(init) and _ours(init) and id(init) not in seen:
                    seen.add(id(init))
                    yield f"{where}.__init__", init
            elif callable(obj):
                yield f"{obj.__module__}.{getattr(obj, '__qualname__', name)}", obj


def _var_keyword(fn: Callable[..., Any]) -> str | None:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: nothing to show
        return None
    return next((p.name for p in params if p.kind is p.VAR_KEYWORD), None)


def test_no_public_signature_hides_its_options() -> None:
    found = {name: kw for name, fn in _callables() if (kw := _var_keyword(fn)) is not None}
    hidden = {name: kw for name, kw in found.items() if name not in ALLOWED}
    assert not hidden, f"options hidden in **kwargs (name them, or list why): {hidden}"
    stale = sorted(set(ALLOWED) - set(found))
    assert not stale, f"ALLOWED names no longer taking **kwargs (remove them): {stale}"


def test_the_walk_reaches_the_stores() -> None:
    """The walk is not vacuous: the constructors issue 26 named are among what it checks."""
    from corevo_obs.claims import PostgresJobStore
    from corevo_obs.leases import RedisLeaseStore
    from corevo_obs.loop import install_loop_health

    walked = {id(fn) for _, fn in _callables()}  # a shared constructor is walked once
    for ctor in (RedisLeaseStore.__init__, PostgresJobStore.__init__, install_loop_health):
        assert id(ctor) in walked, ctor


def test_install_loop_health_names_every_setting() -> None:
    """Each user-set field of LoopHealthConfig is a keyword of install_loop_health, with
    None (from the environment or the default) as its default."""
    params = inspect.signature(install_loop_health).parameters
    for field in dataclasses.fields(LoopHealthConfig):
        assert field.name in params, field.name
        assert params[field.name].kind is inspect.Parameter.KEYWORD_ONLY
        assert params[field.name].default is None, field.name


@pytest.mark.parametrize("bad", [None, "default", 1, "yes"])
def test_breaker_takes_true_false_or_a_breaker(tmp_path: Path, bad: object) -> None:
    with pytest.raises(ConfigError, match=r"breaker= takes True .* False .* CircuitBreaker"):
        SqliteLeaseStore("q", tmp_path / "l.db", limit=1, breaker=bad)  # type: ignore[arg-type]


def test_breaker_true_false_and_own(tmp_path: Path) -> None:
    db = tmp_path / "l.db"
    with SqliteLeaseStore("q", db, limit=1) as store:
        assert store.breaker is None  # SQLite: none unless asked
    with SqliteLeaseStore("q", db, limit=1, timeout=16, breaker=True) as store:
        assert isinstance(store.breaker, CircuitBreaker)
        assert store.breaker.backoff == 4.0  # the default: a quarter of the timeout
    own = CircuitBreaker("lease:q", failures=2)
    with SqliteLeaseStore("q", db, limit=1, breaker=own) as store:
        assert store.breaker is own
    with SqliteLeaseStore("q", db, limit=1, breaker=False) as store:
        assert store.breaker is None


def test_redis_store_has_the_default_breaker_unless_false() -> None:
    """No connection is made: the client from a URL connects at the first command."""
    url = "redis://127.0.0.1:1/0"
    with RedisLeaseStore("q", url, limit=1, timeout=8) as store:
        assert isinstance(store.breaker, CircuitBreaker) and store.breaker.backoff == 2.0
    with RedisLeaseStore("q", url, limit=1, breaker=False) as store:
        assert store.breaker is None
    with pytest.raises(ConfigError, match="breaker= takes True"):
        RedisLeaseStore("q", url, limit=1, breaker=None)  # type: ignore[arg-type]
