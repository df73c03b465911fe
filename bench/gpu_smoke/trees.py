"""GPU smoke (issue 17): tree ensembles on CUDA at batch 100,000 — the 100-tree random forest and the 500-tree
gradient-boosting model of bench/trees.py, each tree tactic on its own (kernel registry) and the engine tfg.build
picks (tactics timed by the builder; CUDA graph on), against onnxruntime on the CPU (all cores).

One line per case:  PASS|FAIL <model> <tactic> b100000: <ms> ms (onnxruntime CPU <ms> ms, <×>) match: labels <k>/N
differ, max|Δp| <d>   — labels exact and probabilities rtol 1e-5 / atol 1e-5; times: CUDA-synchronised median of 5.
The engine line adds the build time and whether the call ran as a CUDA graph (FAIL if not: nothing is copied from
the host per call). Budget < 90 s (model training ~10 s, onnxruntime ~10 s, the builds' timing the rest).

    PYTHONPATH=. python3 bench/gpu_smoke/trees.py          (H200; exit 1 on any FAIL)
    PYTHONPATH=. python3 bench/gpu_smoke/trees.py --cpu    (the same logic at batch 2,000 on the CPU)

The GPU host has no scikit-learn/skl2onnx: run it once here with TREES_MODELS=bench/.work/trees (trains, converts
and writes the two models and the features there), then on the device with the same variable and that folder carried.
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
SHORT = {"random forest, 100 trees": "rf100", "gradient boosting, 500 trees": "gb500"}
FAILS: list[str] = []


def sync():
    if DEV.type == "cuda":
        torch.cuda.synchronize()


def timed(fn, n=5):
    fn()
    out = []
    for _ in range(n):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)


def match(got, want) -> tuple[bool, str]:
    labels, probs = (g.detach().cpu().numpy() for g in got)
    if labels.shape != want[0].shape or probs.shape != want[1].shape:
        return False, f"shapes {labels.shape}, {probs.shape} vs {want[0].shape}, {want[1].shape}"
    ok = np.array_equal(labels, want[0]) and np.allclose(probs, want[1], rtol=1e-5, atol=1e-5)
    return ok, (f"labels {int((labels != want[0]).sum())}/{labels.size} differ, "
                f"max|Δp| {float(np.abs(probs - want[1]).max()):.1e}")


def line(ok, model, case, ms, ort_ms, detail):
    name = f"{model} {case}"
    speed = f", {ort_ms / ms:.1f}×" if ms else ""
    timing = f"{ms:.2f} ms (onnxruntime CPU {ort_ms:.1f} ms{speed})" if ms is not None else "not timed"
    print(f"{'PASS' if ok else 'FAIL'} {name} b{BATCH}: {timing} match: {detail}", flush=True)
    if not ok:
        FAILS.append(name)


def main() -> int:
    t_start = time.perf_counter()
    models, data = trees.models(os.environ.get("TREES_MODELS"))
    x = np.resize(data, (BATCH, data.shape[1])).astype(np.float32)
    xt = torch.from_numpy(x).to(DEV)
    for long_name, onx in models.items():
        model = SHORT[long_name]
        sess = ort.InferenceSession(onx, providers=["CPUExecutionProvider"])
        want = sess.run(None, {"X": x})
        ort_ms = timed(lambda: sess.run(None, {"X": x}), n=2) * 1e3
        layer = next(la for la in parse(onx).layers if la.op.startswith("TreeEnsemble"))
        for tac, cfg in candidates(layer, DEV)[0]:
            tid = tac.id(cfg).split(".", 1)[1]
            try:
                k = instantiate(tac.id(cfg), layer, DEV)
                ok, detail = match(k([xt]), want)
                line(ok, model, tid, timed(lambda: k([xt])) * 1e3, ort_ms, detail)
            except Exception as e:  # noqa: BLE001 - one line per case, whatever fails
                line(False, model, tid, None, ort_ms, f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
        try:
            t0 = time.perf_counter()
            eng = tfg.build(onx, device=str(DEV), shapes={"X": ((1, x.shape[1]), x.shape, x.shape)})
            build_s = time.perf_counter() - t0
            chosen = next(la.tactic for la in eng.data.layers if la.op.startswith("TreeEnsemble")).split(".", 1)[1]
            ok, detail = match([eng.run({"X": xt})[k] for k in eng.output_names], want)
            ms = timed(lambda: eng.run({"X": xt})) * 1e3
            why = getattr(eng.context, "graph_disabled_reason", None) if DEV.type == "cuda" else None
            graph = "" if DEV.type != "cuda" else (", CUDA graph" if why is None else f", NO CUDA graph: {why}")
            line(ok and why is None, model, f"engine[{chosen}, build {build_s:.1f} s{graph}]", ms, ort_ms, detail)
        except Exception as e:  # noqa: BLE001
            line(False, model, "engine", None, ort_ms, f"{type(e).__name__}: {str(e).splitlines()[0][:160]}")
    print(f"{len(FAILS)} FAIL, {time.perf_counter() - t_start:.0f} s", flush=True)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
