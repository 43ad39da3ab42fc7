"""Imports cost what they use: the root resolves names lazily, the pytest plugin loads
only itself and the errors it raises, the tooling never loads the runtime. Checked in
fresh interpreters, since this test session has imported everything already.
(Times: bench/import_bench.py.)
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import corevo_obs

OPTIONAL_BACKENDS = ("redis", "psycopg", "psycopg_pool", "opentelemetry", "aiomonitor",
                     "grafanalib", "importlinter", "aiohttp", "httpx", "starlette")
RUNTIME = ("loop", "stages", "offload", "leases", "claims", "events", "cancel", "mpdir",
           "exposition", "observer", "tracing", "otel", "integrations", "monitor", "pyspy")


def _loaded(code: str) -> set[str]:
    probe = code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True)
    return set(json.loads(out.stdout.splitlines()[-1]))


def _ours(modules: set[str]) -> set[str]:
    return {m for m in modules if m == "corevo_obs" or m.startswith("corevo_obs.")}


ROOT = {"corevo_obs"}


def test_root_import_loads_nothing_but_itself() -> None:
    found = _loaded("import corevo_obs")
    assert _ours(found) == ROOT
    assert not {m.split(".")[0] for m in found} & set(OPTIONAL_BACKENDS)


def test_pytest_plugin_loads_only_itself() -> None:
    found = _loaded("import pytest, corevo_obs.integrations.pytest_plugin")
    added = found - _loaded("import pytest")
    assert added == ROOT | {"corevo_obs.integrations", "corevo_obs.integrations.pytest_plugin",
                            "corevo_obs.core", "corevo_obs.core.errors"}, sorted(added)


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


def test_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        corevo_obs.no_such_name  # noqa: B018


def test_the_root_installs_no_import_hook_and_no_aliases() -> None:
    """0.1 was never published: no finder in every host's sys.meta_path, no root aliases."""
    code = ("import sys\nbefore = list(sys.meta_path)\nimport corevo_obs\n"
            "print(sys.meta_path == before, hasattr(corevo_obs, 'SqliteLeaseStore'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["True", "False"]
    with pytest.raises(ModuleNotFoundError):
        __import__("corevo_obs.errors")  # a 0.1 path
