#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export TRITON_INTERPRET=1
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@" tests
