#!/usr/bin/env bash
# One command for the GRPO loop: a venv with the Python client, numpy and
# matplotlib (pip's configured index), then `polar up --policy learnable`,
# 30 GRPO steps, and the reward curve in examples/grpo-loop/reward.png.
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -d node_modules ] || npm ci
[ -x .polar/venv-python/bin/python ] || python3 -m venv .polar/venv-python
.polar/venv-python/bin/python -c 'import polar_client, numpy, matplotlib' 2>/dev/null ||
  .polar/venv-python/bin/pip install -q --disable-pip-version-check ./clients/python numpy matplotlib
exec .polar/venv-python/bin/python examples/grpo-loop/grpo_loop.py "$@"
