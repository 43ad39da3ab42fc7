"""Imports cost what they use: the root resolves names lazily, the pytest plugin loads
only itself, the tooling never loads the runtime. Checked in fresh interpreters, since
this test session has imported everything already. (Times: bench/import_bench.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest

import corevo_obs

OPTIONAL_BACKENDS = ("redis", "psycopg", "psycopg_pool", "opentelemetry", "aiomonitor",
                     "grafanalib", "importlinter", "aiohttp", "httpx", "starlette")
RUNTIME = ("loop", "stages", "offload", "leases", "claims", "events", "cancel", "mpdir",
           "exposition", "observer", "tracing", "integrations", "monitor", "pyspy")


def _loaded(code: str) -> set[str]:
    probe = code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def _ours(modules: set[str]) -> set[str]:
    return {m for m in modules if m == "corevo_obs" or m.startswith("corevo_obs.")}


def test_root_import_loads_nothing_but_itself() -> None:
    found = _loaded("import corevo_obs")
    assert _ours(found) == {"corevo_obs"}
    assert not {m.split(".")[0] for m in found} & set(OPTIONAL_BACKENDS)


def test_pytest_plugin_loads_only_itself() -> None:
    found = _loaded("import pytest, corevo_obs.pytest_plugin")
    added = found - _loaded("import pytest")
    assert added == {"corevo_obs", "corevo_obs.pytest_plugin"}, sorted(added)


def test_lint_loads_no_runtime_module() -> None:
    found = _ours(_loaded("import corevo_obs.lint"))
    runtime = {m for m in found if m.count(".") and m.split(".")[1] in RUNTIME}
    assert not runtime, f"the lint imports runtime modules: {sorted(runtime)}"


def test_public_api_resolves_and_is_the_declared_list() -> None:
    assert corevo_obs.__all__ == sorted(corevo_obs._API)
    for name in corevo_obs.__all__:
        assert getattr(corevo_obs, name) is not None
    assert corevo_obs.__version__[0].isdigit()
    assert set(corevo_obs.__all__) <= set(dir(corevo_obs))


@pytest.mark.parametrize("name", sorted(corevo_obs._MOVED))
def test_moved_names_still_import_with_a_warning(name: str) -> None:
    module = corevo_obs._MOVED[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(corevo_obs, name)
    assert value is getattr(__import__(f"corevo_obs.{module}", fromlist=[name]), name)
    assert any(issubclass(w.category, DeprecationWarning) and f"corevo_obs.{module}"
               in str(w.message) for w in caught)


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        corevo_obs.no_such_name  # noqa: B018
