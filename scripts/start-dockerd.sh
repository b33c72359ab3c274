#!/usr/bin/env bash
# Starts a Docker engine by hand (no systemd) when none answers on the socket,
# then waits until it does. Idempotent: a running engine is left alone.
#   DOCKER_SOCK   socket path (default /var/run/docker.sock)
#   DOCKERD_LOG   log file (default /var/log/polar-dockerd.log)
set -euo pipefail

SOCK=${DOCKER_SOCK:-/var/run/docker.sock}
LOG=${DOCKERD_LOG:-/var/log/polar-dockerd.log}
TIMEOUT_S=${DOCKERD_START_TIMEOUT:-60}

ping() { curl -fsS --max-time 2 --unix-socket "$SOCK" http://localhost/_ping >/dev/null 2>&1; }

if ping; then
  echo "start-dockerd: engine already answering on $SOCK"
  exit 0
fi
command -v dockerd >/dev/null || { echo "start-dockerd: dockerd not installed (run scripts/install-docker.sh)" >&2; exit 1; }

# A stale pid file from a dead engine blocks a new one.
if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then rm -f /var/run/docker.pid; fi
if ! pgrep -x dockerd >/dev/null; then
  echo "start-dockerd: starting dockerd (log: $LOG)"
  setsid nohup dockerd --host="unix://$SOCK" >>"$LOG" 2>&1 </dev/null &
fi

for _ in $(seq 1 $((TIMEOUT_S * 5))); do
  if ping; then
    echo "start-dockerd: engine ready ($(docker version --format '{{.Server.Version}}' 2>/dev/null || echo '?'), storage $(docker info --format '{{.Driver}}' 2>/dev/null || echo '?'))"
    exit 0
  fi
  sleep 0.2
done
echo "start-dockerd: engine did not answer on $SOCK within ${TIMEOUT_S}s; last log lines:" >&2
tail -n 30 "$LOG" >&2 || true
exit 1
