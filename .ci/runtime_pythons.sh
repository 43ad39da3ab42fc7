#!/usr/bin/env bash
# The runtime tests that need no server but Redis and PostgreSQL, under every other
# supported Python installed here (3.12, 3.13; the main run covers the main Python).
# asyncio, threading and the interpreter's frames differ between versions: the loop
# health, the offload adapter, the stages, the stores and the lifecycle run on each.
# Each interpreter gets its own venv (reused between runs) with the package installed
# from this checkout (`pip install .`, non-editable: the package installs there too)
# and the tests import this checkout via PYTHONPATH, except the docs code blocks, which
# run against the installed package. Needs the servers of .ci/run.
# Usage: bash .ci/runtime_pythons.sh [MAIN_PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/find_python.sh
main_py=${1:-python3}
main_version=$("$main_py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
venvs=${COREVO_CI_VENVS:-${XDG_CACHE_HOME:-$HOME/.cache}/corevo-obs-ci}

# fast, and together they reach every runtime package (about 2 min per Python here)
TESTS=(
  tests/test_offload.py tests/test_stages.py tests/test_loop_health.py
  tests/test_lifecycle.py tests/test_errors.py tests/test_imports.py
  tests/test_http_clients.py tests/test_events.py tests/test_claims.py
  tests/test_catalog.py tests/test_settings.py tests/test_settings_sources.py
  tests/test_telemetry.py tests/test_promclient.py tests/test_exposition_scope.py
  tests/test_mpdir.py tests/test_leases.py tests/test_leases_breaker.py
  tests/test_cancel.py tests/test_otel_metrics.py
)
status=0

for version in 3.12 3.13; do
  if [ "$version" = "$main_version" ]; then
    echo "-- Python $version: covered by the main test run"
    continue
  fi
  if ! py=$(find_python "$version"); then
    echo "-- note: Python $version is not installed here: the runtime tests do not run under it"
    continue
  fi
  venv="$venvs/$version"
  echo "-- Python $version ($py, venv $venv)"
  ci_venv "$py" "$venv" --force-reinstall --no-deps .
  ci_venv "$py" "$venv" \
    ".[redis,postgres-binary,otel,otel-metrics,monitor,pyspy,contracts,dashboards,aiohttp,httpx,gunicorn,uvicorn,pytest]" \
    pytest-timeout opentelemetry-sdk jsonschema pyyaml fastapi pyflakes requests litestar
  PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider "${TESTS[@]}" || status=1
  # every docs Python block as a script, importing the package installed in the venv (not
  # this checkout); the shell commands run once, under the main Python
  COREVO_DOCS_INSTALLED=1 COREVO_DOCS_PYTHON_ONLY=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" \
    "$venv/bin/python" -m pytest -q -p no:cacheprovider -m system tests/test_doc_pages.py \
    || status=1
done
exit $status
