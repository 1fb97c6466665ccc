#!/usr/bin/env bash
# Runs the integration suite: real emberd processes driven by firebase-admin from PyPI, in a
# virtualenv this script makes (Tests/integration/.venv is ignored by git).
set -euo pipefail
cd "$(dirname "$0")/.."
# The console's tests drive a real headless Chromium (Tests/integration/test_console.py).
./scripts/bootstrap.sh --with-browser
VENV=.venv
if [ ! -x "$VENV/bin/pytest" ] || ! "$VENV/bin/python" -c "import firebase_admin, yaml, prometheus_client, selenium, moto.server" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r Tests/integration/requirements.txt
fi
export EMBERD="${EMBERD:-$PWD/.build/debug/emberd}"
export EMBER="${EMBER:-$(dirname "$EMBERD")/ember}"
# Tests/robustness: the history checkers' own tests and a short seeded fault campaign (issue 16).
exec "$VENV/bin/pytest" -q -p no:cacheprovider Tests/integration Tests/robustness "$@"
