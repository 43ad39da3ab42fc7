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
from corevo_obs import _old_paths

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


ROOT = {"corevo_obs", "corevo_obs._old_paths"}  # the package and its finder for 0.1 paths


def test_root_import_loads_nothing_but_itself() -> None:
    found = _loaded("import corevo_obs")
    assert _ours(found) == ROOT
    assert not {m.split(".")[0] for m in found} & set(OPTIONAL_BACKENDS)


def test_pytest_plugin_loads_only_itself() -> None:
    found = _loaded("import pytest, corevo_obs.integrations.pytest_plugin")
    added = found - _loaded("import pytest")
    assert added == ROOT | {"corevo_obs.integrations", "corevo_obs.integrations.pytest_plugin"
                            }, sorted(added)


def test_lint_loads_no_runtime_module() -> None:
    found = _ours(_loaded("import corevo_obs.tooling.lint"))
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


@pytest.mark.parametrize("old", sorted(_old_paths.MOVED_MODULES))
def test_a_0_1_module_path_is_the_new_module_with_a_warning(old: str) -> None:
    """In a fresh interpreter, so the import really goes through the finder."""
    new = _old_paths.MOVED_MODULES[old]
    code = (f"import warnings, importlib\n"
            f"with warnings.catch_warnings(record=True) as seen:\n"
            f"    warnings.simplefilter('always')\n"
            f"    a = importlib.import_module({old!r})\n"
            f"for w in seen:\n    print('WARNED', w.category.__name__, w.message)\n"
            f"b = importlib.import_module({new!r})\n"
            f"print('SAME', a is b, b.__spec__.name)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert f"WARNED DeprecationWarning {old} moved to {new}" in out, out
    assert f"SAME True {new}" in out, out


def test_old_paths_finder_is_silent_for_other_names() -> None:
    assert _old_paths.new_path("corevo_obs.loop") is None
    assert _old_paths.new_path("corevo_obs.lint_extra") is None
    assert _old_paths.new_path("corevo_obs.lint.scan") == "corevo_obs.tooling.lint.scan"
    assert _old_paths.new_path("corevo_obs.lint.catalog") == "corevo_obs.tooling.lint.call_catalog"
    for new in _old_paths.MOVED_MODULES.values():
        __import__(new)  # every target exists


def test_an_0_1_importlinter_config_still_loads_the_contract_type() -> None:
    old = "corevo_obs.contracts.contract"
    code = (f"import warnings, importlib\nwarnings.simplefilter('ignore')\n"
            f"cls = getattr(importlib.import_module({old!r}), 'ShrinkOnlyLayersContract')\n"
            f"print(cls.__module__, cls.type_name)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["corevo_obs.tooling.importcontract.contract", "shrink_only_layers"]
