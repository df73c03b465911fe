"""GPU smoke (issue 15.3): the persistent Triton kernel cache across processes. Builds a small 2-layer MLP-with-
LayerNorm-and-GELU model and the seed GELU case (fp16) on CUDA in a fresh process twice with one TFG_CACHE_DIR:
the second build must add no cache entry (no Triton compile) and be faster; a third after corrupting one cubin
must rebuild it and still run correctly; then a cold build with TFG_COMPILE_WORKERS=8 (a fresh folder: Triton
kernels found by a dry call and compiled in 8 worker processes) must give the same result and report its time
beside the serial cold build. Prints PASS/FAIL lines and the cold/warm/parallel build seconds.

    PYTHONPATH=. python3 bench/gpu_smoke/compile_cache.py
"""

import os
import subprocess
import sys
import tempfile
import time

CHILD = r'''
import io, sys, time, torch
import tensorforge as tfg
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.l1, self.l2 = torch.nn.Linear(256, 1024), torch.nn.Linear(1024, 256)
        self.ln = torch.nn.LayerNorm(256)
    def forward(self, x):
        return self.ln(x + self.l2(torch.nn.functional.gelu(self.l1(x))))
torch.manual_seed(0)
net = Net().eval()
buf = io.BytesIO()
torch.onnx.export(net, (torch.randn(8, 128, 256),), buf, dynamo=False, opset_version=17, input_names=["x"], output_names=["y"])
t0 = time.perf_counter()
engine = tfg.build(buf.getvalue(), shapes={"x": (8, 128, 256)}, device="cuda", fp16=True)
secs = time.perf_counter() - t0
from tensorforge.runtime import ExecutionContext
x = torch.randn(8, 128, 256, device="cuda")
y = ExecutionContext(engine.data, "cuda").run({"x": x})["y"].float()
ref = net.cuda()(x)
err = (y - ref).abs().max().item()
print(f"RESULT {secs:.3f} {err:.5f}")
'''


def child(env):
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, env=env, timeout=80)
    if p.returncode != 0:
        return None, None, p.stderr[-2000:]
    secs, err = p.stdout.split("RESULT", 1)[1].split()
    return float(secs), float(err), time.perf_counter() - t0


def entries(root):
    out = []
    for dp, dn, fn in os.walk(os.path.join(root, "triton")):
        out += [os.path.join(dp, f) for f in fn if f.endswith(".cubin")]
    return sorted(out)


def main():
    root = tempfile.mkdtemp(prefix="tfgcache")
    env = {**os.environ, "TFG_CACHE_DIR": root, "PYTHONPATH": os.getcwd(), "TFG_COMPILE_WORKERS": "0"}
    fails = 0

    def check(name, ok, info):
        nonlocal fails
        print(f"{'PASS' if ok else 'FAIL'} {name} {info}")
        fails += not ok
    cold, err1, wall1 = child(env)
    if cold is None:
        check("cold_build", False, wall1)
        sys.exit(1)
    first = entries(root)
    check("cold_build", err1 < 5e-2 and len(first) > 0, f"build {cold:.2f} s, {len(first)} cubins, max err {err1:.4f}")
    warm, err2, _ = child(env)
    second = entries(root)
    check("warm_build_compiles_nothing", second == first, f"{len(second) - len(first)} new cubins")
    check("warm_build_faster", warm is not None and warm < cold, f"cold {cold:.2f} s, warm {warm:.2f} s")
    with open(first[0], "r+b") as f:
        f.truncate(64)
    again, err3, _ = child(env)
    intact = all(os.path.getsize(f) > 64 for f in entries(root))
    check("corrupt_entry_rebuilt", again is not None and err3 < 5e-2 and intact,
          f"build {again} s, max err {err3}, every cubin intact: {intact}")
    par_root = tempfile.mkdtemp(prefix="tfgcache-par")
    par, err4, info = child({**env, "TFG_CACHE_DIR": par_root, "TFG_COMPILE_WORKERS": "8"})
    check("parallel_cold_build", par is not None and err4 < 5e-2 and len(entries(par_root)) > 0,
          f"8 workers {par} s vs serial cold {cold:.2f} s, max err {err4}, {len(entries(par_root))} cubins"
          + ("" if par is not None else f" {info}"))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
