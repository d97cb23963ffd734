#!/usr/bin/env bash
# The whole test run (`make test`), once every environment is synced:
# - the full suite on the default Python, in the foreground;
# - beside it, one after the other: the MassGen tests (their own environment) and, on the lowest and
#   highest supported Pythons when the machine has them and they differ from the default, the tests
#   whose behaviour depends on the Python or DuckDB version (tests/version_sensitive.py). Their output is
#   shown when the full suite ends. They share nothing with the full suite but the machine (the one test
#   that needs fixed ports takes a lock: tests/test_readme.py).
# Exits with the first non-zero status; a run that collected no tests counts as a failure. Each run
# lists its slowest tests (--durations), for whoever has to keep the whole run under 30 minutes.
set -u
UV=$1; PY_OTHERS=$2; OTHER_DEPS=$3
PY=.venv/bin/python MG=.venv-massgen/bin/python
side_log=$(mktemp) side_codes=$(mktemp)
trap 'rm -f "$side_log" "$side_codes"' EXIT

collected() {  # pytest's exit code, with "no tests collected" (5) turned into a failure
  local code=$1 what=$2
  if [ "$code" -eq 5 ]; then echo "pytest collected no $what" >&2; echo 1; else echo "$code"; fi
}

side() {
  if "$MG" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    echo "--- the MassGen tests (.venv-massgen)"
    "$MG" -m pytest -q --durations=10 tests_massgen; collected $? "MassGen tests" >>"$side_codes"
  else
    echo "warning: MassGen needs Python >= 3.11; its tests did not run" >&2
  fi
  local default v found venv c
  default=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  for v in $PY_OTHERS; do
    [ "$v" = "$default" ] && continue
    found=$(for c in "python$v" "$(pyenv root 2>/dev/null)"/versions/"$v".*/bin/python3; do
      "$c" -c 'import sys; sys.exit(sys.version_info[:2] != tuple(map(int, "'"$v"'".split("."))))' \
        2>/dev/null && { command -v "$c"; break; }; done)
    if [ -z "$found" ]; then echo "warning: no Python $v on this machine; the suite did not run on it" >&2; continue; fi
    venv=.venv-py${v/./}
    echo "--- the version-sensitive tests on Python $v ($found)"
    # shellcheck disable=SC2086  # OTHER_DEPS is a list of flags
    if UV_PROJECT_ENVIRONMENT=$venv "$UV" sync --quiet -p "$found" $OTHER_DEPS; then
      "$venv/bin/python" -m pytest -q --durations=10 --version-sensitive; collected $? "tests on Python $v" >>"$side_codes"
    else
      echo 1 >>"$side_codes"
    fi
  done
}

side >"$side_log" 2>&1 &
side_pid=$!
echo "--- the full suite on the default Python (the MassGen and other Pythons' runs go on beside it)"
"$PY" -m pytest -q --durations=15
code=$?
main=$(collected "$code" tests)
wait "$side_pid"
cat "$side_log"
for code in $main $(cat "$side_codes"); do
  if [ "$code" -ne 0 ]; then exit "$code"; fi
done
