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

# The Python client (clients/python) and the Python examples, against the real
# stack: a venv with the client and the test dependencies (pip's configured
# index), pytest over clients/python/tests and examples/. Runs with the whole
# suite (no vitest arguments given). pytest's exit code 5 ("no tests
# collected") counts as a failure.
pytest_ran=0
if [ "$#" -eq 0 ]; then
  if ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
  fi
  [ -x .polar/venv-python/bin/python ] || python3 -m venv .polar/venv-python
  # --retries 0: where only the configured local indexes are reachable, an unreachable default index fails at once instead of after backoff.
  .polar/venv-python/bin/pip install -q --disable-pip-version-check --retries 0 ./clients/python pytest numpy matplotlib
  py_dirs=(clients/python/tests)
  [ -d examples ] && py_dirs+=(examples)
  rm -f .polar/pytest-results.xml
  pytest_ran=1
  .polar/venv-python/bin/python -m pytest -q -p no:cacheprovider --junitxml=.polar/pytest-results.xml "${py_dirs[@]}" || {
    echo "pytest failed (exit code $?)"
    status=1
  }
fi

# One plain closing line with the counts of both suites.
PYTEST_RAN=$pytest_ran node -e '
  const fs = require("fs");
  let passed = 0, failed = 0, skipped = 0;
  try {
    const r = JSON.parse(fs.readFileSync(".polar/test-results.json", "utf8"));
    passed += r.numPassedTests; failed += r.numFailedTests; skipped += r.numPendingTests + r.numTodoTests;
  } catch { failed += 1; console.log("no vitest results"); }
  if (process.env.PYTEST_RAN === "1") {
    try {
      const xml = fs.readFileSync(".polar/pytest-results.xml", "utf8");
      for (const m of xml.matchAll(/<testsuite\b([^>]*)>/g)) {
        const n = (k) => Number((new RegExp(`\\b${k}="(\\d+)"`).exec(m[1]) ?? [])[1] ?? 0);
        const bad = n("failures") + n("errors");
        passed += n("tests") - bad - n("skipped"); failed += bad; skipped += n("skipped");
      }
    } catch { failed += 1; console.log("no pytest results"); }
  }
  console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
' || true
exit $status
