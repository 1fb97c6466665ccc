#!/usr/bin/env bash
# Installs what Ember needs on Debian and is not there yet: liblmdb-dev (the storage engine),
# libjemalloc-dev (emberd's malloc),
# libsqlite3-dev (the client's offline persistence, through GRDB), zlib1g-dev (the HTTP client
# that delivers triggers links zlib; Swift's own prerequisites usually bring it),
# pkg-config, python3-venv for the integration suite, openssl, and with --with-browser the headless
# Chromium and its WebDriver that the console's browser tests drive. Uses sudo when not root.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
missing=()
dpkg -s liblmdb-dev >/dev/null 2>&1 || missing+=(liblmdb-dev)
dpkg -s libsqlite3-dev >/dev/null 2>&1 || missing+=(libsqlite3-dev)
dpkg -s libjemalloc-dev >/dev/null 2>&1 || missing+=(libjemalloc-dev)
dpkg -s zlib1g-dev >/dev/null 2>&1 || missing+=(zlib1g-dev)
command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ "${#missing[@]}" -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ "${1:-}" = "--with-browser" ] && { ! command -v chromium >/dev/null 2>&1 || ! command -v chromedriver >/dev/null 2>&1; }; then
  echo "bootstrap: installing chromium and chromium-driver (the console's browser tests)" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium chromium-driver >/dev/null
fi
if [ "${1:-}" = "--with-etcd" ] && ! command -v etcd >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq etcd-server etcd-client >/dev/null
fi
