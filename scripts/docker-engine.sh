#!/usr/bin/env bash
# A Docker engine for `make image` and the compose test, on a Debian machine that may have none.
#
#   scripts/docker-engine.sh ensure   install docker.io and docker-compose when missing (apt, sudo
#                                     when not root), start dockerd when no engine answers, and
#                                     print the docker client to use
#   scripts/docker-engine.sh stop     stop the dockerd that `ensure` started (and nothing else)
#
# `ensure` records a daemon it starts in $STATE (its pid); `stop` stops only that one, so an
# engine the machine already ran is never touched. dockerd's log: $STATE_DIR/dockerd.log.
set -euo pipefail
STATE_DIR="${EMBER_DOCKER_STATE:-/tmp/ember-docker}"
STATE="$STATE_DIR/dockerd.pid"
# How long a daemon we start may take to answer (seconds).
START_TIMEOUT=60
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

# The client: Debian's (20.10, with BuildKit built in) unless a newer one has the buildx plugin.
# A CLI of 23 or later without buildx refuses DOCKER_BUILDKIT=1 builds, and the image build
# needs BuildKit to skip the Swift stage it does not use.
client() {
  if docker buildx version >/dev/null 2>&1; then echo docker; return; fi
  if [ -x /usr/bin/docker ]; then echo /usr/bin/docker; return; fi
  echo docker
}

answers() { "$(client)" info >/dev/null 2>&1; }

ensure() {
  missing=()
  command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
  command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "docker-engine: installing ${missing[*]}" >&2
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  if ! answers; then
    mkdir -p "$STATE_DIR"
    echo "docker-engine: no engine answers; starting dockerd (log $STATE_DIR/dockerd.log)" >&2
    # setsid: the daemon outlives this script (and the make or pytest that ran it).
    $SUDO setsid dockerd >"$STATE_DIR/dockerd.log" 2>&1 < /dev/null &
    echo $! > "$STATE"
    for _ in $(seq 1 "$START_TIMEOUT"); do
      answers && break
      sleep 1
    done
    if ! answers; then
      echo "docker-engine: dockerd did not answer within ${START_TIMEOUT}s; its log:" >&2
      tail -20 "$STATE_DIR/dockerd.log" >&2
      exit 1
    fi
  fi
  client
}

stop() {
  [ -f "$STATE" ] || return 0
  pid=$(cat "$STATE")
  rm -f "$STATE"
  if kill -0 "$pid" 2>/dev/null; then
    echo "docker-engine: stopping the dockerd it started (pid $pid)" >&2
    $SUDO kill "$pid"
    # dockerd stops its containers first; wait for it so a next start finds no stale socket.
    for _ in $(seq 1 "$START_TIMEOUT"); do kill -0 "$pid" 2>/dev/null || return 0; sleep 1; done
    echo "docker-engine: dockerd (pid $pid) still running after ${START_TIMEOUT}s" >&2
    return 1
  fi
}

case "${1:-}" in
  ensure) ensure ;;
  stop) stop ;;
  client) client ;;
  *) echo "usage: $0 ensure|stop|client" >&2; exit 2 ;;
esac
