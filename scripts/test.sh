#!/usr/bin/env bash
# Set up .venv (scripts/setup.sh) and run the whole test suite on the CPU. Extra arguments go to pytest.
# SKIP_SETUP=1 skips the setup step (.ci/run sets it after building a new environment itself).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${SKIP_SETUP:-0}" != 1 ]; then
  bash scripts/setup.sh
fi
export TRITON_INTERPRET=1
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@" tests
