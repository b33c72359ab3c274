#!/usr/bin/env bash
# Builds one Docker image per SWE-style instance in config/swe/ (no registry
# needed): first polar-swe-python:bookworm = the base image plus Debian's
# python3 and python3-pytest, then per instance an image whose /testbed is a git
# checkout at the instance's base commit, named like SWE-bench's instance
# images: sweb.eval.x86_64.<instance_id with "__" as "_1776_">:latest.
# Idempotent: an image whose label matches its inputs is kept as is.
#   POLAR_BASE_IMAGE   (default polar-base:bookworm)
#   FORCE=1            rebuild every image
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${POLAR_BASE_IMAGE:-polar-base:bookworm}
PY=polar-swe-python:bookworm

# The legacy builder prints a deprecation notice on stderr: show stderr only on failure.
build() { local log; log=$(mktemp); if ! docker build "$@" 2>"$log" >/dev/null; then cat "$log" >&2; rm -f "$log"; return 1; fi; rm -f "$log"; }
label() { docker image inspect "$1" --format "{{ index .Config.Labels \"$2\" }}" 2>/dev/null || true; }

base_id=$(docker image inspect "$BASE" --format '{{.Id}}')
if [ -n "${FORCE:-}" ] || [ "$(label "$PY" polar.swe.base)" != "$base_id" ]; then
  echo "swe-images: building $PY from $BASE"
  # The build reaches Debian's archive through the host network.
  ctx=$(mktemp -d)
  build -q --network host -t "$PY" --label "polar.swe.base=$base_id" -f - "$ctx" <<DOCKERFILE
FROM $BASE
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-pytest >/dev/null \
 && rm -rf /var/lib/apt/lists/* && git config --system --add safe.directory '*'
DOCKERFILE
  rmdir "$ctx"
fi
py_id=$(docker image inspect "$PY" --format '{{.Id}}')

for dir in config/swe/*/; do
  [ -f "$dir/instance.json" ] || continue
  read -r id repo created base_commit < <(node -e '
    const i = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    console.log(i.instance_id, i.repo, i.created_at, i.base_commit);' "$dir/instance.json")
  image="sweb.eval.x86_64.$(echo "${id//__/_1776_}" | tr 'A-Z' 'a-z'):latest"
  hash=$( (echo "$py_id"; cat "$dir/instance.json") | sha256sum | cut -c1-16)
  if [ -z "${FORCE:-}" ] && [ "$(label "$image" polar.swe.hash)" = "$hash" ]; then
    echo "swe-images: $image up to date"
    continue
  fi
  echo "swe-images: building $image"
  build -q -t "$image" --label "polar.swe.hash=$hash" --label "polar.swe.instance=$id" \
    --build-arg "REPO=$repo" --build-arg "CREATED=$created" --build-arg "BASE_COMMIT=$base_commit" \
    -f - "$dir/base" <<DOCKERFILE
FROM $PY
ARG REPO
ARG CREATED
ARG BASE_COMMIT
COPY . /testbed
WORKDIR /testbed
RUN find . -name __pycache__ -prune -exec rm -rf {} + \
 && git -c init.defaultBranch=main init -q && git add -A \
 && GIT_AUTHOR_NAME=polar GIT_AUTHOR_EMAIL=swe@polar.invalid GIT_COMMITTER_NAME=polar GIT_COMMITTER_EMAIL=swe@polar.invalid \
    GIT_AUTHOR_DATE="\$CREATED" GIT_COMMITTER_DATE="\$CREATED" git commit -q -m "\$REPO at base" \
 && test "\$(git rev-parse HEAD)" = "\$BASE_COMMIT" || { echo "base commit mismatch: \$(git rev-parse HEAD) != \$BASE_COMMIT" >&2; exit 1; }
DOCKERFILE
done
