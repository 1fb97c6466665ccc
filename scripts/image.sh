#!/usr/bin/env bash
# Builds the Ember image `ember:<version>` and `ember:latest` (what `make image` runs).
#
#   scripts/image.sh [--binaries DIR] [--tag NAME:TAG]... [--source]
#
# Where the Swift image (`swift:6.3.1-bookworm`) is present or can be pulled, the Dockerfile
# compiles emberd and ember inside it (BINARIES=source). Where it cannot (no registry reachable),
# the same Dockerfile takes binaries built on this host (BINARIES=host): a release build with the
# Swift standard library linked in, or the binaries in --binaries DIR (the test suite passes its
# debug build), staged in .image-stage/ with any toolchain library they load. The runtime stage
# is the same either way. Its base, `debian:bookworm-slim`, is made here with debootstrap when
# the engine has none and none can be pulled.
#
# --tag replaces the default tags. --source insists on the in-image compile.
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT_IMAGE="${SWIFT_IMAGE:-swift:6.3.1-bookworm}"
BASE_IMAGE="debian:bookworm-slim"
# How long a registry pull may try before we build without it (seconds).
PULL_TIMEOUT=45
STAGE=.image-stage
BINARIES_DIR=""
TAGS=()
FORCE_SOURCE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --binaries) BINARIES_DIR="$2"; shift 2 ;;
    --tag) TAGS+=("$2"); shift 2 ;;
    --source) FORCE_SOURCE=1; shift ;;
    *) echo "usage: $0 [--binaries DIR] [--tag NAME:TAG]... [--source]" >&2; exit 2 ;;
  esac
done

DOCKER=$(./scripts/docker-engine.sh ensure)
have_image() { "$DOCKER" image inspect "$1" >/dev/null 2>&1; }
try_pull() { timeout "$PULL_TIMEOUT" "$DOCKER" pull -q "$1" >/dev/null 2>&1; }

# The base image: pulled, or made from Debian's own packages.
if ! have_image "$BASE_IMAGE" && ! try_pull "$BASE_IMAGE"; then
  ./scripts/debian-base-image.sh "$DOCKER" "$BASE_IMAGE"
fi

mode=host
if [ -z "$BINARIES_DIR" ] && { have_image "$SWIFT_IMAGE" || try_pull "$SWIFT_IMAGE"; }; then mode=source; fi
if [ "$FORCE_SOURCE" = 1 ] && [ "$mode" != source ]; then
  echo "image: $SWIFT_IMAGE is not present and cannot be pulled; build without --source to use host binaries" >&2
  exit 1
fi

if [ "$mode" = host ]; then
  if [ -z "$BINARIES_DIR" ]; then
    # `make release`: the standard library linked in, so the runtime stage needs no toolchain.
    make release
    BINARIES_DIR=.build/release
  fi
  rm -rf "$STAGE"
  mkdir -p "$STAGE/bin" "$STAGE/lib"
  cp "$BINARIES_DIR/emberd" "$BINARIES_DIR/ember" "$STAGE/bin/"
  # Libraries that come from the Swift toolchain (a debug build links them dynamically); the
  # system's (libc, liblmdb, libjemalloc, ...) come from Debian's packages in the image.
  toolchain=$(dirname "$(dirname "$(readlink -f "$(command -v swift)")")")
  for b in "$STAGE/bin/emberd" "$STAGE/bin/ember"; do
    ldd "$b" | awk '/=> \// { print $3 }' | while read -r lib; do
      case "$(readlink -f "$lib")" in "$toolchain"/*) cp -n "$lib" "$STAGE/lib/" ;; esac
    done
  done
  if ldd "$STAGE/bin/emberd" | grep -q "not found"; then
    echo "image: emberd needs a library this host does not have:" >&2
    ldd "$STAGE/bin/emberd" | grep "not found" >&2
    exit 1
  fi
fi

if [ "$mode" = host ]; then
  # The staged binaries say what they are (--binaries DIR may hold another build).
  version=$("$STAGE/bin/emberd" --version 2>/dev/null | head -1 | awk '{print $2}' || true)
else
  # A source build compiles this tree: its constant, never a possibly stale .build/ binary.
  version=$(sed -n 's/.*static let version = "\(.*\)".*/\1/p' Sources/EmberCore/BuildInfo.swift)
fi
[ -n "$version" ] || { echo "image: cannot tell the version of the binaries" >&2; exit 1; }
if [ "${#TAGS[@]}" -eq 0 ]; then TAGS=("ember:$version" "ember:latest"); fi
tag_args=()
for t in "${TAGS[@]}"; do tag_args+=(-t "$t"); done

echo "image: building ${TAGS[*]} (version $version, binaries: $mode)" >&2
# BuildKit: builds only the stages the chosen BINARIES needs (the Swift stage is never pulled
# in host mode).
DOCKER_BUILDKIT=1 "$DOCKER" build -q --build-arg BINARIES="$mode" --build-arg SWIFT_IMAGE="$SWIFT_IMAGE" \
  --build-arg VERSION="$version" "${tag_args[@]}" . >/dev/null
"$DOCKER" run --rm --entrypoint emberd "${TAGS[0]}" --version | head -1 >&2
echo "image: ${TAGS[*]}" >&2
