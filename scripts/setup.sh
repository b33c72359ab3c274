#!/usr/bin/env bash
# Installs what polar itself needs on a fresh Debian 12 machine (root):
# nats-server (Debian package) when missing, and the npm dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nats-server >/dev/null 2>&1 && [ ! -x /usr/sbin/nats-server ]; then
  echo "setup: installing nats-server (Debian package)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq nats-server >/dev/null
fi
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: installing npm dependencies"
  npm ci --no-audit --no-fund --loglevel=error
fi
