#!/usr/bin/env bash
# Runs the whole test suite with every real service it needs: nats-server,
# a Docker engine with the local base image, bubblewrap, and the pinned
# harness CLIs in the tools cache. Each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

# The harness end-to-end tests record every connect() of the CLIs with strace.
if ! command -v strace >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq strace >/dev/null
fi

# The dashboard's browser tests drive Debian's chromium through playwright-core (no browser download).
if ! command -v chromium >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq chromium >/dev/null
fi

if [ "${POLAR_SKIP_DOCKER:-}" != "1" ]; then
  # With an engine installed here, a Docker test may not silently skip.
  export POLAR_REQUIRE_DOCKER=1
  bash scripts/install-docker.sh
  bash scripts/start-dockerd.sh
  bash scripts/base-image.sh
  # One image per SWE-style instance in config/swe (python3 + pytest, /testbed at the base commit).
  bash scripts/swe-images.sh
fi
if [ "${POLAR_SKIP_TOOLS:-}" != "1" ]; then
  node bin/polar.js tools install
fi
npx tsc --noEmit -p .
# The package's library entry (dist/), which the package test imports by name.
npm run build --silent
mkdir -p .polar
status=0
npx vitest run --reporter=default --reporter=json --outputFile.json=.polar/test-results.json "$@" || status=$?
# One plain closing line with the counts.
node -e '
  const r = JSON.parse(require("fs").readFileSync(".polar/test-results.json", "utf8"));
  console.log(`${r.numPassedTests} passed, ${r.numFailedTests} failed, ${r.numPendingTests + r.numTodoTests} skipped`);
' || true
exit $status
