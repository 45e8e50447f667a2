#!/usr/bin/env bash
# Run the tests. Arguments go to pytest (./test.sh -k loader, ./test.sh tests/test_docs.py).
#
#   ./test.sh                                 every test: tests/setup.sh first (chromium, .venv, Azurite),
#                                             then `ruff check .`, then pytest in .venv
#   ./test.sh -m "not browser and not slow"   the quick run: no set-up, in the current environment (the
#                                             active virtualenv, else .venv where it exists, else python3);
#                                             tests that need an extra the environment lacks are skipped
#
# A run is the quick one when its -m expression deselects `slow`. `ruff check .` runs first whenever ruff
# is there (settings in pyproject.toml) and stops the run on a finding.
set -euo pipefail
cd "$(dirname "$0")"
VENV="${RL_BOARD_VENV:-.venv}"
quick=0
previous=""
for arg in "$@"; do
  case "$previous|$arg" in
    "-m|"*"not slow"*|*"|-m"*"not slow"*|*"|--markers="*"not slow"*) quick=1 ;;
  esac
  previous="$arg"
done
if [ "$quick" = 1 ]; then
  if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then PYTHON="$VIRTUAL_ENV/bin/python"
  elif [ -x "$VENV/bin/python" ]; then PYTHON="$VENV/bin/python"
  else PYTHON="$(command -v python3)"
  fi
else
  tests/setup.sh
  PYTHON="$VENV/bin/python"
fi
RUFF="$(dirname "$PYTHON")/ruff"
if [ -x "$RUFF" ]; then "$RUFF" check .  # the linter first: an unused import or a shadowed name fails fast
elif command -v ruff >/dev/null; then ruff check .
else echo "ruff is not installed here: the lint is left out of this run (pip install -r requirements-dev.txt)"
fi
exec "$PYTHON" -m pytest "$@"
