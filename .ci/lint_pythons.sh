#!/usr/bin/env bash
# The lint's tests under every supported Python installed here (3.11, 3.12, 3.13): `ast`
# differs between them. The lint needs only the standard library, so each interpreter
# gets pytest and the test suite's few imports, and imports this checkout via PYTHONPATH.
# Tests that need the dev extras (flake8-async, pre-commit) skip there, saying why; the
# site-packages test lints the dev environment's tree, the same files under every `ast`.
# Usage: bash .ci/lint_pythons.sh [MAIN_PYTHON]   (MAIN_PYTHON's version is skipped: the
# main test run covers it)
set -euo pipefail
cd "$(dirname "$0")/.."
main_py=${1:-python3}
main_version=$("$main_py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
site_packages=$("$main_py" -c 'import site; print(site.getsitepackages()[0])')
. .ci/find_python.sh

for version in 3.11 3.12 3.13; do
  if [ "$version" = "$main_version" ]; then
    echo "-- Python $version: covered by the main test run"
    continue
  fi
  if ! py=$(find_python "$version"); then
    echo "-- note: Python $version is not installed here: the lint's tests do not run under it"
    continue
  fi
  echo "-- Python $version ($py)"
  "$py" -m pip install -q --root-user-action=ignore --disable-pip-version-check \
    pytest pytest-timeout jsonschema prometheus-client pyyaml
  PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" COREVO_LINT_SITE_PACKAGES="$site_packages" \
    "$py" -m pytest -q -p no:cacheprovider tests/test_lint_*.py
done
