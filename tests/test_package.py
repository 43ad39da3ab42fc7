"""The distribution a user installs: the built wheel's contents and the declared dependencies.

The wheel is built offline from this checkout, as `pip install .` would build it; the
dependency check reads pyproject.toml and every import in the package, so an import of a
third-party module that no dependency or extra declares fails here, not on a user's machine.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from email.parser import Parser
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest

from tests.test_export import _repo_files

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (path,) = out.glob("*.whl")
    return zipfile.ZipFile(path)


def _metadata(wheel: zipfile.ZipFile) -> tuple[str, dict[str, list[str]]]:
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    message = Parser().parsestr(wheel.read(name).decode())
    return name.rsplit("/", 1)[0], {k: message.get_all(k) or [] for k in set(message.keys())}


def test_the_wheel_is_typed_licensed_and_versioned(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    assert "corevo_obs/py.typed" in names  # PEP 561: mypy reads our hints in user code
    dist_info, meta = _metadata(wheel)
    assert meta["Version"] == [PYPROJECT["project"]["version"]]
    assert meta["License-Expression"] == ["Apache-2.0"]  # PEP 639 (SPDX)
    assert any(c.startswith("Programming Language :: Python :: 3.13")
               for c in meta["Classifier"]), meta["Classifier"]
    assert meta["Keywords"], "keywords help a search on the package index"
    licence = [n for n in names if n.startswith(dist_info) and "LICENSE" in n]
    assert licence, sorted(n for n in names if n.startswith(dist_info))
    assert "Apache License" in wheel.read(licence[0]).decode()
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## {PYPROJECT['project']['version']}" in changelog


def test_the_wheel_carries_the_generated_files(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    for kind in ("dashboards", "alerts"):
        for rel in _repo_files(kind):
            assert f"corevo_obs/tooling/assets/{kind}/{rel}" in names
    catalog = wheel.read("corevo_obs/tooling/lint/blocking_calls.toml")
    assert catalog == (ROOT / "lint_rules" / "blocking_calls.toml").read_bytes()


def test_the_shipped_copies_are_links_to_the_repository_files() -> None:
    """The package's catalog and assets are links to the files users read in the repository
    (lint_rules/, dashboards/, alerts/): an edit that replaces a link with a copy (``sed
    -i`` does) would let the two drift apart."""
    pkg = ROOT / "corevo_obs" / "tooling"
    for link, target in ((pkg / "lint" / "blocking_calls.toml", "lint_rules/blocking_calls.toml"),
                         (pkg / "assets" / "dashboards", "dashboards"),
                         (pkg / "assets" / "alerts", "alerts")):
        assert link.is_symlink(), f"{link.relative_to(ROOT)} must link to {target}"
        assert link.resolve() == (ROOT / target).resolve()


def _requirement_names(requirements: list[str]) -> set[str]:
    out = set()
    for req in requirements:
        name = re.match(r"[A-Za-z0-9._-]+", req)
        assert name, req
        out.add(name.group(0).lower().replace("_", "-"))
    return out


def _third_party_imports() -> dict[str, set[str]]:
    """Top-level module name -> the files of corevo_obs that import it (lazily or not)."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / "corevo_obs").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                top = module.split(".")[0]
                if top not in sys.stdlib_module_names and top != "corevo_obs":
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_imported_distribution_is_declared() -> None:
    project = PYPROJECT["project"]
    extras = {k: v for k, v in project["optional-dependencies"].items() if k != "dev"}
    declared = _requirement_names(project["dependencies"])
    for requirements in extras.values():
        declared |= _requirement_names(requirements)
    providers = packages_distributions()  # module -> installed distributions (dev env)
    imports = _third_party_imports()
    assert {"prometheus_client", "redis", "grimp", "attr"} <= set(imports)  # the walk works
    undeclared = {}
    for module, files in imports.items():
        dists = {d.lower().replace("_", "-") for d in providers.get(module, [])}
        assert dists, f"{module} (imported by {sorted(files)}) is not installed in dev"
        if not dists & declared:
            undeclared[module] = (sorted(dists), sorted(files))
    assert not undeclared, f"imported but declared in no dependency or extra: {undeclared}"


def test_extras_leave_the_applications_choices_open() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert "opentelemetry-sdk" not in _requirement_names(extras["otel"])  # the app's SDK
    assert not any("[" in r for r in extras["postgres"])  # psycopg's build is the app's
    assert "psycopg[binary]" in " ".join(extras["postgres-binary"])


def test_the_sdist_runs_its_own_tests(tmp_path: Path) -> None:
    """Every tracked file but .gitignore is in the sdist (MANIFEST.in), so the unpacked tree
    runs its own tests: one fast module runs there, against that tree."""
    import tarfile

    built = subprocess.run(
        [sys.executable, "-c", "import sys; from setuptools import build_meta; "
         "print(build_meta.build_sdist(sys.argv[1]))", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    name = built.stdout.split()[-1]
    with tarfile.open(tmp_path / name) as sdist:
        shipped = {m.name.split("/", 1)[1] for m in sdist.getmembers() if "/" in m.name}
        sdist.extractall(tmp_path / "unpacked", filter="data")
    assert {"tests/conftest.py", "tests/helpers/doc_pages.py", "CHANGELOG.md"} <= shipped
    assert not any("__pycache__" in n for n in shipped)
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if tracked.returncode == 0:  # from a git checkout: nothing tracked is left out
        missing = {f for f in tracked.stdout.split() if f not in shipped and not any(
            s.startswith(f + "/") for s in shipped)} - {".gitignore"}
        assert not missing, sorted(missing)
    (top,) = (tmp_path / "unpacked").iterdir()
    ran = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/test_catalog.py"], cwd=top, capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": str(top)})
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
