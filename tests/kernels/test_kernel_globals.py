"""No Triton kernel of the package reads a module-level tl.constexpr global.

Why: Triton 3.6 merges a callee's recorded globals into the caller's cache key before it hashes the callee, so the
key of a kernel whose callees read such a global depended on what the process had hashed before: a fresh compile
worker and the build's parent disagreed on every INT8 GEMM key on the H200 (each variant compiled twice). Reproduced
with Triton 3.6 on the CPU; the rule makes keys independent of that order, whatever the Triton version.
Oracle: Triton's own DependenciesFinder record of the globals
each kernel uses (`used_global_vals`, filled when its cache key is computed), in a subprocess without
TRITON_INTERPRET (the interpreter has no cache keys); a planted kernel shows the check fires.
"""

import json
import os
import subprocess
import sys

SCRIPT = r'''
import importlib, json, pkgutil
import triton, triton.language as tl
import tensorforge.kernels as kernels

PLANTED = tl.constexpr(3.0)

@triton.jit
def _planted(x):
    return x * PLANTED

def constexpr_globals(fn):
    fn.cache_key       # Triton fills used_global_vals while hashing the function and its callees
    return sorted(n for (n, _), (v, _) in fn.used_global_vals.items() if isinstance(v, tl.constexpr))

found, scanned = {}, 0
for info in pkgutil.iter_modules(kernels.__path__):
    module = importlib.import_module(f"tensorforge.kernels.{info.name}")
    for name, value in vars(module).items():
        if isinstance(value, triton.runtime.jit.JITFunction) and value.__module__ == module.__name__:
            scanned += 1
            if g := constexpr_globals(value):
                found[f"{info.name}.{name}"] = g
print("REPORT" + json.dumps({"planted": constexpr_globals(_planted), "found": found, "scanned": scanned}))
'''


def _report(folder) -> dict:
    script = folder / "scan_kernels.py"           # triton.jit reads the planted kernel's source from a file
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")),
                                         env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300,
                          cwd=os.path.join(os.path.dirname(__file__), "..", ".."))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.split("REPORT", 1)[1])


def test_no_package_kernel_reads_a_constexpr_global(tmp_path):
    report = _report(tmp_path)
    assert report["planted"] == ["PLANTED"]          # the check sees one
    assert report["scanned"] >= 20                   # the scan reached the package's kernels
    assert report["found"] == {}, f"module-level tl.constexpr globals in kernels (write the constant in the kernel): {report['found']}"
