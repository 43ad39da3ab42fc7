"""Every ``>>>`` example in the library runs, none is marked ``+SKIP``: docstrings that
nothing runs drift into examples that fail. An example that cannot run here (a server,
a real host path) is written as a plain code block without ``>>>``."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import corevo_obs

# modules whose import needs an optional backend or starts an application
SKIP_PREFIXES = ("corevo_obs.cli", "corevo_obs.demo", "corevo_obs.tooling.assets")


def _modules() -> list[str]:
    found = []
    for info in pkgutil.walk_packages(corevo_obs.__path__, "corevo_obs."):
        if not info.name.startswith(SKIP_PREFIXES):
            found.append(info.name)
    return sorted(found)


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} failing example(s)"
    skipped = [f"{test.name}:{example.lineno}"
               for test in doctest.DocTestFinder().find(module, name)
               for example in test.examples if example.options.get(doctest.SKIP)]
    assert not skipped, f"{name}: examples that never run: {skipped}"
