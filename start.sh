#!/usr/bin/env bash
# Serve RL Logging Board at http://127.0.0.1:8901 on the bundled rollout_samples/.
# Makes its own virtualenv (.venv) from requirements.txt the first time, or when that file changes.
# Only this machine can reach it; RL_BOARD_ADDRESS=0.0.0.0 ./start.sh shares it with your network:
# then set RL_BOARD_ROOTS=/data/runs[:/other] so only folders inside those can be listed or loaded.
# RL_BOARD_PORT changes the port.
set -euo pipefail
cd "$(dirname "$0")"
VENV="${RL_BOARD_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ] || ! cmp -s requirements.txt "$VENV/.installed-requirements.txt"; then
  echo "Setting up $VENV from requirements.txt (first run only)..."
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -r requirements.txt
  cp requirements.txt "$VENV/.installed-requirements.txt"
fi
ADDRESS="${RL_BOARD_ADDRESS:-127.0.0.1}"
if [ "$ADDRESS" != "127.0.0.1" ] && [ "$ADDRESS" != "localhost" ] && [ -z "${RL_BOARD_ROOTS:-}" ]; then
  echo "warning: serving on $ADDRESS without RL_BOARD_ROOTS: anyone who reaches the port can read every" >&2
  echo "         log file this user can. Set RL_BOARD_ROOTS=/path/to/runs to allow only those folders." >&2
fi
# a blank or unusable RL_BOARD_ROOTS is an error now, never "allow everything"
"$VENV/bin/python" - <<'PY'
import sys
from rl_board.base.access import RootError, check_roots
try:
    check_roots()
except RootError as exc:
    sys.exit(f"error: {exc}")
PY
exec "$VENV/bin/python" -m streamlit run app.py \
  --server.address "$ADDRESS" --server.port "${RL_BOARD_PORT:-8901}" "$@"
