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
pyenv_versions="${PYENV_ROOT:-$HOME/.pyenv}/versions"

find_python() {  # $1 = 3.N: an interpreter that really is 3.N (pyenv shims may not run)
  local want=$1 exe
  for exe in "$(command -v "python$want" || true)" \
             $(ls -d "$pyenv_versions/$want".*/bin/python3 2>/dev/null | sort -V -r); do
    [ -n "$exe" ] && [ -x "$exe" ] || continue
    if [ "$("$exe" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$want" ]; then
      echo "$exe"
      return 0
    fi
  done
  return 1
}

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
