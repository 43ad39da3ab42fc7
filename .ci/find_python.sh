# Sourced by the scripts that run tests under every supported Python (3.11, 3.12, 3.13).
# find_python 3.N prints an interpreter that really is 3.N (pyenv shims may not run).
pyenv_versions="${PYENV_ROOT:-$HOME/.pyenv}/versions"

find_python() {
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

# ci_venv PYTHON DIR PIP_ARGS...: the venv at DIR (made with PYTHON once, reused between
# runs) with PIP_ARGS installed into it; prints nothing. Used by every per-version test run.
ci_venv() {
  local py=$1 venv=$2
  shift 2
  [ -x "$venv/bin/python" ] || "$py" -m venv "$venv"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@"
}
