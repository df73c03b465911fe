#!/usr/bin/env bash
# A venv of its own for the real `tritonserver` (from the nvidia-pytriton wheel), used by tests/serve.
#
# Triton's Python-backend stub is built against numpy 1.x, so this venv pins numpy<2; torch and tensorforge
# come from the project's .venv through a .pth file appended *after* this venv's site-packages (so numpy 1.x
# wins). Idempotent and pinned (shared dependencies at requirements-ci.lock's versions): a stamp records the
# pins, the lock's checksum and the project venv's path; when it matches, nothing is done (≈ 0.2 s).
# Result: .venv/tritonserver/bin/tritonserver (a wrapper that puts this venv's bin first on PATH and the
# interpreter's LIBDIR first on LD_LIBRARY_PATH). Override the location with TFG_TRITONSERVER_VENV.
set -euo pipefail
cd "$(dirname "$0")/../.."
MAIN=.venv
VENV=${TFG_TRITONSERVER_VENV:-$MAIN/tritonserver}
PINS="nvidia-pytriton==0.7.0 numpy==1.26.4"
LAYOUT=3   # bump when what this script builds changes
STAMP="$VENV/.tensorforge-pins"
PY="$MAIN/bin/python"
[ -x "$PY" ] || { echo "tritonserver.sh: $PY missing (run scripts/setup.sh first)" >&2; exit 1; }
MAIN_SITE=$(cd "$("$PY" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" && pwd)
WANT="$PINS $LAYOUT $MAIN_SITE $(cksum < requirements-ci.lock)"   # a moved checkout or a new lock rebuilds
if [ -x "$VENV/bin/tritonserver" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$WANT" ]; then
  exit 0
fi
BASE=$("$PY" -c 'import sys; print(sys.base_prefix)')
rm -rf "$VENV"
"$BASE/bin/python3" -m venv "$VENV"
# every dependency it shares with the project resolves to requirements-ci.lock's version (numpy excepted)
grep -E '^[A-Za-z0-9_.-]+==' requirements-ci.lock | grep -v -E '^(numpy|pip)==' > "$VENV/constraints.txt"
if ! "$VENV/bin/python" -m pip install -q --disable-pip-version-check -c "$VENV/constraints.txt" $PINS \
    > "$VENV/pip.log" 2>&1; then
  grep -v "^WARNING: Location" "$VENV/pip.log" >&2; exit 1
fi
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')
# torch, safetensors, tensorforge (editable) from the project venv, after this venv's own packages
echo "import site; site.addsitedir('$MAIN_SITE')" > "$SITE/zz_tensorforge_main.pth"
PKG=$("$VENV/bin/python" -c 'import pytriton, os; print(os.path.dirname(pytriton.__file__))')
PYVER=$("$VENV/bin/python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
cp "$PKG/tritonserver/python_backend_stubs/$PYVER/triton_python_backend_stub" "$PKG/tritonserver/backends/python/"
LIBDIR=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')
cat > "$VENV/bin/tritonserver" <<WRAP
#!/usr/bin/env bash
# tritonserver from nvidia-pytriton, with this venv's python for the Python-backend stub
export PATH="$(cd "$VENV" && pwd)/bin:\$PATH"
export LD_LIBRARY_PATH="$LIBDIR:$PKG/tritonserver/external_libs:\${LD_LIBRARY_PATH:-}"
exec "$PKG/tritonserver/bin/tritonserver" --backend-directory="$PKG/tritonserver/backends" "\$@"
WRAP
chmod +x "$VENV/bin/tritonserver"
echo "$WANT" > "$STAMP"
