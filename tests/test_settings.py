"""The one settings resolver: precedence, parsing by annotation, bounds, sources named."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass
from typing import Any

import pytest

from corevo_obs.core.errors import ConfigError
from corevo_obs.core.settings import option, resolve


@dataclass(frozen=True)
class Demo:
    interval: float = option(0.01, minimum=0.001, maximum=10)
    count: int = option(3, minimum=1)
    watchdog: bool = option(True)
    roots: tuple[str, ...] = option(())
    name: str | None = option(None)
    mode: str = option("fast", choices=("fast", "slow"))


def test_keyword_beats_environment_beats_default() -> None:
    env = {"COREVO_DEMO_INTERVAL": "0.5", "COREVO_DEMO_COUNT": "7"}
    got = resolve(Demo, "COREVO_DEMO", environ=env, interval=0.25)
    assert (got.interval, got.count, got.watchdog, got.mode) == (0.25, 7, True, "fast")


def test_environment_parsed_by_annotation() -> None:
    env = {"COREVO_DEMO_WATCHDOG": "off", "COREVO_DEMO_ROOTS": "/a:/b", "COREVO_DEMO_NAME": "w"}
    got = resolve(Demo, "COREVO_DEMO", environ=env)
    assert (got.watchdog, got.roots, got.name) == (False, ("/a", "/b"), "w")


@pytest.mark.parametrize(("env", "kwargs", "needle"), [
    ({"COREVO_DEMO_INTERVAL": "nan"}, {}, "$COREVO_DEMO_INTERVAL: must be a finite number"),
    ({"COREVO_DEMO_INTERVAL": "soon"}, {}, "$COREVO_DEMO_INTERVAL: cannot parse 'soon'"),
    ({"COREVO_DEMO_WATCHDOG": "maybe"}, {}, "$COREVO_DEMO_WATCHDOG: cannot parse 'maybe'"),
    ({}, {"interval": 100.0}, "Demo(interval=...): 100.0 is outside 0.001..10"),
    ({}, {"count": 0}, "Demo(count=...): 0 is outside 1..inf"),
    ({}, {"count": 2.5}, "Demo(count=...): expected a whole number"),
    ({}, {"watchdog": "yes"}, "Demo(watchdog=...): expected True or False"),
    ({}, {"mode": "medium"}, "'medium' is not one of fast, slow"),
    ({}, {"colour": "red"}, "unknown option 'colour'"),
])
def test_bad_values_name_their_source(env: dict[str, str], kwargs: dict[str, Any],
                                      needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        resolve(Demo, "COREVO_DEMO", environ=env, **kwargs)
    assert needle in str(err.value)


def test_every_problem_reported_together() -> None:
    env = {"COREVO_DEMO_INTERVAL": "x", "COREVO_DEMO_COUNT": "-1"}
    with pytest.raises(ConfigError) as err:
        resolve(Demo, "COREVO_DEMO", environ=env)
    assert "INTERVAL" in str(err.value) and "COUNT" in str(err.value)


def test_result_is_immutable() -> None:
    got = resolve(Demo, "COREVO_DEMO", environ={})
    with pytest.raises(FrozenInstanceError):
        got.count = 5  # type: ignore[misc]


def test_in_host_a_bad_value_is_counted_logged_once_and_its_default_used(
        caplog: pytest.LogCaptureFixture) -> None:
    from prometheus_client import CollectorRegistry

    from corevo_obs.core.guard import reset_for_tests
    from corevo_obs.core.settings import resolve_in_host

    reset_for_tests()
    registry = CollectorRegistry()
    env = {"COREVO_DEMO_INTERVAL": "soon", "COREVO_DEMO_COUNT": "7", "COREVO_DEMO_MODE": "x"}
    with caplog.at_level("DEBUG", logger="corevo_obs"):
        for _ in range(2):
            got = resolve_in_host(Demo, "COREVO_DEMO", component="demo-config", environ=env,
                                  worker="w1", registry=registry)
            assert (got.interval, got.count, got.mode) == (0.01, 7, "fast")
    assert registry.get_sample_value("corevo_instrumentation_errors_total",
                                     {"worker": "w1", "component": "demo-config"}) == 2
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1
    assert "$COREVO_DEMO_INTERVAL: cannot parse 'soon'" in warned[0]
    assert "$COREVO_DEMO_MODE: 'x' is not one of fast, slow" in warned[0]
    assert "(the defaults are used instead)" in warned[0]
