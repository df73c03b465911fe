#!/usr/bin/env bash
# One command on a fresh machine: set up .venv, then run the seed flow (examples/gelu/run.py).
# The first run builds .venv from requirements-ci.lock (README.md says how long that took from nothing);
# later runs reuse it (README.md lists the times measured). Files go to examples/gelu/out/ (or --out DIR).
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ ! -x .venv/bin/python ]; then
  echo "first run: building .venv from requirements-ci.lock (scripts/setup.sh; minutes — README.md has the time)"
fi
start=$SECONDS
bash scripts/setup.sh
echo "setup: $((SECONDS - start)) s"
exec .venv/bin/python examples/gelu/run.py "$@"
