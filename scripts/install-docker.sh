#!/usr/bin/env bash
# Installs the sandbox engines the runtimes use (Debian packages): Docker
# (docker.io, with tini as its init), bubblewrap, debootstrap, and socat (the
# fast proxy forwarder of bubblewrap sandboxes). Skips what is already
# installed; safe to rerun.
set -euo pipefail

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v socat >/dev/null 2>&1 || need+=(socat)
if [ ${#need[@]} -eq 0 ]; then
  echo "install-docker: docker.io, bubblewrap, debootstrap and socat already installed"
  exit 0
fi
echo "install-docker: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
echo "install-docker: done ($(dockerd --version))"
