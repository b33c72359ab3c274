#!/usr/bin/env bash
# Quickstart demo: installs what it needs, then `polar up` runs an embedded
# nats-server, the supervisor, one gateway and the sim, submits
# config/tasks/demo-shell.json (4 sessions whose shell harness makes real
# model calls through the capturing proxy), prints the results and stops.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
mkdir -p .polar
exec node bin/polar.js up --http-port 0 --run config/tasks/demo-shell.json --out .polar/demo-traces.jsonl "$@"
