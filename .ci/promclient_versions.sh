#!/usr/bin/env bash
# The tests of what corevo_obs still takes from prometheus_client's insides (the value
# class swap, the multiprocess value file format and merge: core/promclient.py, mpdir/)
# under each end of the supported range in pyproject.toml (`prometheus-client>=0.20,<0.27`,
# promclient.SUPPORTED): the oldest and the newest release. Each release gets its own venv
# (reused between runs) with the package installed from this checkout, then that exact
# prometheus-client; the tests import this checkout via PYTHONPATH.
# Usage: bash .ci/promclient_versions.sh [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/find_python.sh
py=${1:-python3}
venvs=${COREVO_CI_VENVS:-${XDG_CACHE_HOME:-$HOME/.cache}/corevo-obs-ci}

RELEASES=(0.20.0 0.26.0)
TESTS=(tests/test_promclient.py tests/test_mpdir.py tests/test_exposition_scope.py
       tests/test_leases_observer.py)
status=0

for release in "${RELEASES[@]}"; do
  venv="$venvs/prometheus-client-$release"
  echo "-- prometheus-client $release (venv $venv)"
  ci_venv "$py" "$venv" ".[redis,pytest]" pytest-timeout "prometheus-client==$release"
  PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider "${TESTS[@]}" || status=1
done
exit $status
