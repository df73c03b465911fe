#!/usr/bin/env bash
# Run the ONNX backend test suite alone on the CPU (a few minutes) and record its counts in
# tests/onnx_backend/results.json (read by tools/gen_readme_status.py for the README). Uses .venv as it is
# (run scripts/setup.sh first on a new machine). Extra arguments go to pytest; a narrowed run writes nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
export TRITON_INTERPRET=1
export TENSORFORGE_BACKEND_RESULTS="$PWD/tests/onnx_backend/results.json"
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@" tests/onnx_backend/test_backend_suite.py
