"""One root exception: every error class the package defines roots at CorevoObsError.

A host catches ``CorevoObsError`` and has everything the suite raises on purpose; a bad
constructor argument is also a ``ValueError`` (``ConfigError``), as callers expect.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

import corevo_obs
from corevo_obs.core.errors import ConfigError, CorevoObsError

#: signals caught inside the module that defines them, never raised to a caller
INTERNAL = {
    "corevo_obs.leases.breaker.ShortCircuited",
    "corevo_obs.tooling.lint.config.FieldError",
    "corevo_obs.tooling.lint.cache._Bad",
}


def _exception_classes() -> dict[str, type[BaseException]]:
    found = {}
    for info in pkgutil.walk_packages(corevo_obs.__path__, "corevo_obs."):
        try:
            module = importlib.import_module(info.name)
        except ModuleNotFoundError as exc:  # an extra this interpreter lacks (not ours)
            if (exc.name or "corevo_obs").startswith("corevo_obs"):
                raise
            continue
        for name, value in vars(module).items():
            if (inspect.isclass(value) and issubclass(value, BaseException)
                    and value.__module__ == info.name):
                found[f"{info.name}.{name}"] = value
    return found


def test_every_exception_class_roots_at_corevo_obs_error() -> None:
    classes = _exception_classes()
    assert {"corevo_obs.mpdir.lock.LockBusy", "corevo_obs.offload.QueueFull",
            "corevo_obs.integrations.pytest_plugin.LoopBlocked"} <= set(classes)
    stray = sorted(name for name, cls in classes.items()
                   if not issubclass(cls, CorevoObsError) and name not in INTERNAL)
    assert not stray, f"not under CorevoObsError: {stray}"
    assert set(INTERNAL) <= set(classes), "an INTERNAL entry no longer exists"


def test_the_kinds_callers_already_catch_are_kept() -> None:
    from corevo_obs.integrations.pytest_plugin import LoopBlocked
    from corevo_obs.mpdir.dbfile import CorruptFile
    from corevo_obs.mpdir.safe import UnsafeEntry

    assert issubclass(ConfigError, ValueError)
    assert issubclass(LoopBlocked, AssertionError)  # pytest reports it as a failure
    assert issubclass(CorruptFile, ValueError)
    assert issubclass(UnsafeEntry, OSError)  # the CLI prints it as a path error


def _lag_sampler() -> object:
    from corevo_obs.loop import LoopLagSampler

    return LoopLagSampler(interval=0, registry=CollectorRegistry())


def _stage_recorder() -> object:
    from corevo_obs.stages import StageRecorder

    return StageRecorder(max_kinds=0, registry=CollectorRegistry())


def _janitor(tmp: Path) -> object:
    from corevo_obs.mpdir.janitor import Janitor

    return Janitor(tmp, interval=0)


def _claims(tmp: Path) -> object:
    from corevo_obs.claims import SqliteJobStore

    return SqliteJobStore(tmp / "jobs.db", registry=CollectorRegistry()).reclaim_prestart()


BAD_VALUES: dict[str, Callable[[Path], Any]] = {
    "LoopLagSampler(interval=0)": lambda tmp: _lag_sampler(),
    "StageRecorder(max_kinds=0)": lambda tmp: _stage_recorder(),
    "Janitor(interval=0)": _janitor,
    "JobStore.reclaim_prestart()": _claims,
}


@pytest.mark.parametrize("call", sorted(BAD_VALUES))
def test_a_bad_value_raises_config_error(call: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as raised:
        BAD_VALUES[call](tmp_path)
    assert isinstance(raised.value, ValueError) and str(raised.value)
