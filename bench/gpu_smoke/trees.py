"""GPU smoke (issue 17.1/17.4): the tree-ensemble tactics on CUDA — each of traverse_perfect, traverse, gemm and the
reference, built for the 100-tree random forest and the 500-tree gradient-boosting model of bench/trees.py —
compared with onnxruntime (CPU) at batch 100,000 (labels exact, probabilities rtol 1e-5 / atol 1e-5), and timed
(CUDA-synchronised median of 5 runs); then the engine tfg.build picks (tactics timed by the builder).

    PYTHONPATH=. python3 bench/gpu_smoke/trees.py          (H200; < 90 s; exit 1 on any FAIL)
    PYTHONPATH=. python3 bench/gpu_smoke/trees.py --cpu    (the logic at batch 2,000 on the CPU)
"""

import os
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import tensorforge as tfg  # noqa: E402
from tensorforge.api.high_level import parse  # noqa: E402
from tensorforge.kernels import candidates, instantiate  # noqa: E402

import trees  # noqa: E402  (bench/trees.py: the two models)

CPU = "--cpu" in sys.argv
DEV = torch.device("cpu" if CPU else "cuda")
BATCH = 2000 if CPU else 100_000
FAILS: list[str] = []


def line(ok, name, msg):
    print(f"{'PASS' if ok else 'FAIL'} {name} {msg}", flush=True)
    if not ok:
        FAILS.append(name)


def timed(fn, n=5):
    fn()
    out = []
    for _ in range(n):
        if DEV.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if DEV.type == "cuda":
            torch.cuda.synchronize()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def check(name, got, want):
    labels, probs = (g.detach().cpu().numpy() for g in got)
    ok = np.array_equal(labels, want[0]) and np.allclose(probs, want[1], rtol=1e-5, atol=1e-5)
    bad = int((labels != want[0]).sum())
    line(ok, name, f"labels differing {bad}/{labels.size}, max |Δp| {float(np.abs(probs - want[1]).max()):.1e}")


def main() -> int:
    models, data = trees.models()
    x = np.resize(data, (BATCH, data.shape[1])).astype(np.float32)
    xt = torch.from_numpy(x).to(DEV)
    for name, onx in models.items():
        sess = ort.InferenceSession(onx, providers=["CPUExecutionProvider"])
        t0 = time.perf_counter()
        want = sess.run(None, {"X": x})
        ort_s = time.perf_counter() - t0
        layer = next(la for la in parse(onx).layers if la.op.startswith("TreeEnsemble"))
        for tac, cfg in candidates(layer, DEV)[0]:
            tid = tac.id(cfg)
            try:
                k = instantiate(tid, layer, DEV)
                check(f"{name} / {tid}", k([xt]), want)
                print(f"  {tid}: {timed(lambda: k([xt])) * 1e3:.2f} ms at batch {BATCH} "
                      f"(onnxruntime CPU, all cores: {ort_s * 1e3:.1f} ms)")
            except Exception as e:  # noqa: BLE001
                line(False, f"{name} / {tid}", f"{type(e).__name__}: {str(e)[:200]}")
        t0 = time.perf_counter()
        eng = tfg.build(onx, device=str(DEV), shapes={"X": ((1, x.shape[1]), x.shape, x.shape)})
        chosen = next(la.tactic for la in eng.data.layers if la.op.startswith("TreeEnsemble"))
        got = eng.run({"X": xt})
        check(f"{name} / engine ({chosen}, build {time.perf_counter() - t0:.1f} s)", [got[k] for k in eng.output_names], want)
        print(f"  engine: {timed(lambda: eng.run({'X': xt})) * 1e3:.2f} ms at batch {BATCH}")
        if DEV.type == "cuda":          # the tree kernels copy nothing from the host per call: capturable
            why = getattr(eng.context, "graph_disabled_reason", None)
            line(why is None, f"{name} / CUDA graph", why or "engine ran captured (no fallback reason recorded)")
    print(f"{len(FAILS)} FAIL")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
