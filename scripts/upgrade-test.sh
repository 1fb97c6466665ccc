#!/usr/bin/env bash
# `make upgrade-test`: a rolling upgrade from the previous release to this build, and back for
# one node (Tests/upgrade/test_rolling_upgrade.py). The previous release is CHANGELOG.md's newest
# release entry other than this build's version (an "Unreleased" entry has none): its tag vX.Y.Z,
# or the commit its heading names where the tag is not in this clone. Its emberd is built (debug,
# ~10 min on 2 cores the first time) under .build-prev/.
set -euo pipefail
cd "$(dirname "$0")/.."
current=$(sed -n 's/.*static let version = "\(.*\)".*/\1/p' Sources/EmberCore/BuildInfo.swift)
prev=$(grep -E '^## [0-9]+\.[0-9]+\.[0-9]+' CHANGELOG.md | awk -v cur="$current" '$2 != cur' | head -1)
version=$(echo "$prev" | awk '{print $2}')
commit=$(git rev-parse --verify -q "v$version^{commit}" || echo "$prev" | sed -n 's/.*commit \([0-9a-f]\{7,40\}\).*/\1/p')
[ -n "$commit" ] || { echo "upgrade-test: no tag v$version and no commit in CHANGELOG.md's heading: $prev" >&2; exit 1; }
echo "upgrade-test: previous release $version at $(git rev-parse --short "$commit")" >&2
src=.build-prev/src-$version
if [ ! -f "$src/Package.swift" ]; then
  rm -rf "$src"; mkdir -p "$src"
  git archive "$commit" | tar -x -C "$src"
fi
./scripts/bootstrap.sh
(cd "$src" && swift build --product emberd --scratch-path ../build-$version)
swift build --product emberd
swift build --product ember
test -x .venv/bin/pytest || (python3 -m venv .venv && .venv/bin/pip install -q -r Tests/integration/requirements.txt)
EMBERD_PREVIOUS="$PWD/.build-prev/build-$version/debug/emberd" EMBERD="$PWD/.build/debug/emberd" \
  .venv/bin/pytest -q -s -p no:cacheprovider Tests/upgrade "$@"
