#!/usr/bin/env bash
# Everything the whole test suite needs on a fresh machine, made once and kept: Debian's chromium for the
# browser tests (needs root or sudo), a virtualenv (.venv, or RL_BOARD_VENV) with requirements-dev.txt
# (moto's S3 server and s3fs for the s3 tests, adlfs for the azure tests, ray, mcp, torch, playwright,
# ruff) and requirements-docs.txt (mkdocs: tests/test_docs.py builds the site with --strict), and Azurite
# from npm (.azurite/) for the az:// tests. Each part is skipped when it is already there; ./test.sh runs
# this first unless the run is the quick one.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x /usr/bin/chromium ]; then
  echo "Installing Debian's chromium for the browser test..."
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
VENV="${RL_BOARD_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ] || ! cat requirements.txt requirements-dev.txt requirements-docs.txt | cmp -s - "$VENV/.installed-dev.txt"; then
  echo "Setting up $VENV from requirements-dev.txt and requirements-docs.txt..."
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -r requirements-dev.txt -r requirements-docs.txt
  cat requirements.txt requirements-dev.txt requirements-docs.txt > "$VENV/.installed-dev.txt"
  cp requirements.txt "$VENV/.installed-requirements.txt"
fi
AZURITE_VERSION=3.37.0  # Azure's storage emulator, for the tests marked azure (az:// runs through adlfs)
if [ ! -x .azurite/node_modules/.bin/azurite-blob ] && command -v npm >/dev/null; then
  echo "Installing Azurite $AZURITE_VERSION from npm into .azurite/ for the az:// tests..."
  npm install --silent --no-audit --no-fund --prefix .azurite "azurite@$AZURITE_VERSION" >/dev/null
fi
