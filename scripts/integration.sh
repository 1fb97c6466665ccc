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
# Every temporary file and directory of the run (the tests' data directories, receivers' files,
# Chromium's profile) goes under one parent per run, removed when the run ends: tempfile and the
# processes the tests start honour TMPDIR. A parent left by a run that was killed is removed by the
# next one (its PID is gone). 0755: test_unprivileged's user must reach its own directory in it.
for stale in /tmp/ember-it-run-*; do
  [ -d "$stale" ] || continue
  pid=${stale##*-}
  if [[ "$pid" =~ ^[0-9]+$ ]] && ! kill -0 "$pid" 2>/dev/null; then rm -rf "$stale"; fi
done
RUN_TMP=/tmp/ember-it-run-$$
mkdir -m 0755 "$RUN_TMP"
trap 'rm -rf "$RUN_TMP"' EXIT
export TMPDIR="$RUN_TMP"
# Tests/robustness: the history checkers' own tests and a short seeded fault campaign (issue 16).
"$VENV/bin/pytest" -q -p no:cacheprovider Tests/integration Tests/robustness "$@"
