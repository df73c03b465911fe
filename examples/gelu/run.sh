#!/usr/bin/env bash
# One command on a fresh machine: set up .venv, then run the seed flow (examples/gelu/run.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/setup.sh
exec .venv/bin/python examples/gelu/run.py "$@"
