#!/usr/bin/env bash
# Create .venv (if missing) and install the locked CPU test environment: every package of
# requirements-ci.lock in ONE pip run (exact versions, transitive ones included; torch is the 2.13.0 CPU build),
# then tensorforge itself editable with --no-deps, then each scripts/setup.d/*.sh in sorted order (extra
# environments, e.g. a Triton server's; they get VENV, the absolute .venv path, in their environment).
# From nothing this takes a few minutes (README.md says how long); on an existing .venv, seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
export VENV="$PWD/.venv"
quiet() { grep -v "is ignored: it is neither a file nor a directory" >&2 || true; }   # this machine's pip config
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q "$(grep -E '^pip==' requirements-ci.lock)" 2> >(quiet)
"$VENV/bin/python" -m pip install -q -r requirements-ci.lock 2> >(quiet)
if ! "$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e . > "$VENV/editable-install.log" 2>&1; then
  cat "$VENV/editable-install.log" >&2; exit 1        # setuptools' editable-mode notice stays in the log otherwise
fi
if [ -d scripts/setup.d ]; then
  while IFS= read -r step; do
    echo "setup: $step"
    bash "$step"
  done < <(find scripts/setup.d -maxdepth 1 -name '*.sh' -type f | LC_ALL=C sort)
fi
