#!/usr/bin/env bash
# Builds the local sandbox base image (no image registry is needed):
# debootstrap --variant=minbase bookworm with what the in-container proxy
# forwarder and the harnesses need, then `docker import`. The rootfs tarball is
# cached, so a rerun only imports (or does nothing when the image exists).
#   POLAR_BASE_IMAGE   tag (default polar-base:bookworm)
#   POLAR_CACHE_DIR    tarball cache (default ${XDG_CACHE_HOME:-$HOME/.cache}/polar)
#   POLAR_DEBIAN_MIRROR (default http://deb.debian.org/debian)
#   POLAR_BASE_EXTRA_PACKAGES  comma-separated extra packages
#   FORCE=1            rebuild even if the image and the tarball exist
set -euo pipefail

IMAGE=${POLAR_BASE_IMAGE:-polar-base:bookworm}
CACHE=${POLAR_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/polar}
MIRROR=${POLAR_DEBIAN_MIRROR:-http://deb.debian.org/debian}
PKGS=bash,coreutils,ca-certificates,git,curl,socat,procps,findutils,grep,sed,gzip,xz-utils,patch,less,libstdc++6,tini
[ -n "${POLAR_BASE_EXTRA_PACKAGES:-}" ] && PKGS="$PKGS,$POLAR_BASE_EXTRA_PACKAGES"
TARBALL="$CACHE/rootfs-bookworm-$(echo "$PKGS" | sha256sum | cut -c1-12).tar"

if [ -z "${FORCE:-}" ] && docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "base-image: $IMAGE already present"
  exit 0
fi
mkdir -p "$CACHE"
if [ -n "${FORCE:-}" ] || [ ! -s "$TARBALL" ]; then
  root=$(mktemp -d "${TMPDIR:-/tmp}/polar-rootfs.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  echo "base-image: debootstrap bookworm into $root"
  debootstrap --variant=minbase --include="$PKGS" bookworm "$root" "$MIRROR" >"$CACHE/debootstrap.log" 2>&1 ||
    { tail -n 30 "$CACHE/debootstrap.log" >&2; exit 1; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar --numeric-owner -C "$root" -cf "$TARBALL.tmp" .
  mv "$TARBALL.tmp" "$TARBALL"
  find "$CACHE" -maxdepth 1 -name 'rootfs-bookworm-*.tar' ! -path "$TARBALL" -delete # older package sets
fi
echo "base-image: importing $TARBALL as $IMAGE"
docker import \
  --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'ENV LANG=C.UTF-8' \
  --change 'CMD ["/bin/bash"]' \
  "$TARBALL" "$IMAGE" >/dev/null
echo "base-image: $IMAGE ready ($(docker image inspect "$IMAGE" --format '{{.Size}}') bytes)"
