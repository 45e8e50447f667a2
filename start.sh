#!/usr/bin/env bash
# Serve RL Logging Board at http://127.0.0.1:8901 on the bundled rollout_samples/.
# Makes its own virtualenv (.venv) from requirements.txt the first time, or when that file changes.
# Only this machine can reach it; RL_BOARD_ADDRESS=0.0.0.0 ./start.sh shares it with your network
# (anyone who can reach the port can then read any .jsonl the app can). RL_BOARD_PORT changes the port.
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
exec "$VENV/bin/python" -m streamlit run app.py \
  --server.address "${RL_BOARD_ADDRESS:-127.0.0.1}" --server.port "${RL_BOARD_PORT:-8901}" "$@"
