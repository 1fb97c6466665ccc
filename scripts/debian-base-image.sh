#!/usr/bin/env bash
# Makes the `debian:bookworm-slim` base image from Debian's packages where no registry can be
# reached: `debootstrap --variant=minbase` into a temporary directory (from the apt mirror this
# host uses), trimmed of what an image does not need, imported into the engine.
#
#   scripts/debian-base-image.sh DOCKER-CLIENT IMAGE-NAME
set -euo pipefail
DOCKER="$1"
IMAGE="$2"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
command -v debootstrap >/dev/null 2>&1 || {
  echo "base image: installing debootstrap" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq debootstrap >/dev/null
}
# The mirror the host's apt uses (deb822 sources first, then the one-line format).
mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
if [ -z "$mirror" ]; then
  mirror=$(awk '$1 == "deb" && $3 ~ /^bookworm$/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
fi
mirror="${mirror:-http://deb.debian.org/debian}"
root=$(mktemp -d /tmp/ember-bookworm.XXXXXX)
trap '$SUDO rm -rf "$root"' EXIT
echo "base image: debootstrap --variant=minbase bookworm from $mirror (about a minute)" >&2
$SUDO debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 || {
  tail -20 "$root.log" >&2; exit 1; }
rm -f "$root.log"
# What the official slim image also leaves out: package caches, lists, docs and man pages.
$SUDO rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
  "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/*
$SUDO tar -C "$root" -c . | "$DOCKER" import - "$IMAGE" >/dev/null
echo "base image: $IMAGE made with debootstrap" >&2
