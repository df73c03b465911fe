"""GPU smoke (issue 17.3): models with If, Loop and Scan — and an LSTM inside If, like the voice-activity detector
that failed with "Object of type Network is not JSON serializable" — built on CUDA (the timed tactic path, timing
cache written and reused), run, saved, reloaded, and compared with onnxruntime (CPU) at rtol 1e-3, atol 1e-4.

    PYTHONPATH=. python3 bench/gpu_smoke/control_flow.py          (H200; < 60 s; exit 1 on any FAIL)
    PYTHONPATH=. python3 bench/gpu_smoke/control_flow.py --cpu    (the script's logic without a GPU)
"""

import os
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import tensorforge as tfg  # noqa: E402

DEVICE = "cpu" if "--cpu" in sys.argv else "cuda"
F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
FAILS: list[str] = []


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, opset, inits=()):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m.SerializeToString()


def if_model():
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["t"])], "then", [], [vi("t", F, [3])])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "w"], ["e"])], "else", [], [vi("e", F, [3])])
    return model([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0), helper.make_node("Greater", ["s", "zero"], ["c"]),
                  helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g),
                  helper.make_node("Relu", ["y"], ["z"])],
                 [vi("x", F, [3])], [vi("z", F, [3])], 11,
                 [helper.make_tensor("w", F, [3], [2, 3, 4]), helper.make_tensor("zero", F, [], [0])])


def loop_model():
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "step"], ["acc_out"]), helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Mul", ["acc_out", "acc_out"], ["sq"])],
        "body", [vi("i", I64, []), vi("cond_in", B, []), vi("acc_in", F, [2])],
        [vi("cond_out", B, []), vi("acc_out", F, [2]), vi("sq", F, [2])])
    return model([helper.make_node("Loop", ["n", "c", "a0"], ["a", "sqs"], body=body)],
                 [vi("n", I64, []), vi("c", B, []), vi("a0", F, [2])], [vi("a", F, [2]), vi("sqs", F, None)], 13,
                 [helper.make_tensor("step", F, [2], [0.5, -1.0])])


def scan_model():
    body = helper.make_graph([helper.make_node("Add", ["s", "x"], ["s2"]), helper.make_node("Identity", ["s2"], ["y"])],
                             "body", [vi("s", F, [2]), vi("x", F, [2])], [vi("s2", F, [2]), vi("y", F, [2])])
    return model([helper.make_node("Scan", ["s0", "xs"], ["s", "ys"], body=body, num_scan_inputs=1)],
                 [vi("s0", F, [2]), vi("xs", F, [4, 2])], [vi("s", F, [2]), vi("ys", F, [4, 2])], 16)


def lstm_in_if_model():
    """x (T=6, B=2, I=4); if sum(x) > 0: LSTM (hidden 8) of x, else: LSTM of −x (same weights): Y_h (1, 2, 8)."""
    rng = np.random.default_rng(0)
    w = helper.make_tensor("W", F, [1, 32, 4], rng.normal(0, 0.3, (1, 32, 4)).astype(np.float32).ravel())
    r = helper.make_tensor("R", F, [1, 32, 8], rng.normal(0, 0.3, (1, 32, 8)).astype(np.float32).ravel())
    b = helper.make_tensor("Bb", F, [1, 64], rng.normal(0, 0.1, (1, 64)).astype(np.float32).ravel())
    then_g = helper.make_graph([helper.make_node("LSTM", ["x", "W", "R", "Bb"], ["", "h1"], hidden_size=8)],
                               "then", [], [vi("h1", F, [1, 2, 8])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["nx"]),
                                helper.make_node("LSTM", ["nx", "W", "R", "Bb"], ["", "h2"], hidden_size=8)],
                               "else", [], [vi("h2", F, [1, 2, 8])])
    return model([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0), helper.make_node("Greater", ["s", "zero"], ["c"]),
                  helper.make_node("If", ["c"], ["h"], then_branch=then_g, else_branch=else_g)],
                 [vi("x", F, [6, 2, 4])], [vi("h", F, [1, 2, 8])], 14,
                 [w, r, b, helper.make_tensor("zero", F, [], [0])])


CASES = {
    "if_true": (if_model, {"x": np.array([1, 2, 3], np.float32)}),
    "if_false": (if_model, {"x": np.array([-5, 1, 1], np.float32)}),
    "loop": (loop_model, {"n": np.array(4, np.int64), "c": np.array(True), "a0": np.array([1, 2], np.float32)}),
    "scan": (scan_model, {"s0": np.ones(2, np.float32), "xs": np.arange(8, dtype=np.float32).reshape(4, 2)}),
    "lstm_in_if_pos": (lstm_in_if_model, {"x": np.abs(np.random.default_rng(1).normal(size=(6, 2, 4))).astype(np.float32)}),
    "lstm_in_if_neg": (lstm_in_if_model, {"x": -np.abs(np.random.default_rng(2).normal(size=(6, 2, 4))).astype(np.float32)}),
}


def compare(name, got, want):
    for k, w in want.items():
        g = got[k]
        g = g.detach().cpu().numpy() if hasattr(g, "detach") else np.asarray(g)
        ok = g.shape == w.shape and np.allclose(g, w, rtol=1e-3, atol=1e-4)
        err = float(np.max(np.abs(g.astype(np.float64) - w))) if g.shape == w.shape and w.size else 0.0
        line(ok, f"{name}.{k}", f"shape {g.shape} vs {w.shape}, max |diff| {err:.2e}")


def line(ok, name, msg):
    print(f"{'PASS' if ok else 'FAIL'} {name} {msg}", flush=True)
    if not ok:
        FAILS.append(name)


def main() -> int:
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "timing.cache")
        for name, (make, feeds) in CASES.items():
            onx = make()
            want_sess = ort.InferenceSession(onx, providers=["CPUExecutionProvider"])
            want = dict(zip([o.name for o in want_sess.get_outputs()], want_sess.run(None, feeds)))
            try:
                for attempt in ("first", "second, timing cache"):
                    t0 = time.perf_counter()
                    eng = tfg.build(onx, device=DEVICE, timing_cache=cache)
                    line(True, f"{name}.build[{attempt}]", f"{time.perf_counter() - t0:.2f} s on {DEVICE}")
                compare(name, eng.run(dict(feeds)), want)
                path = os.path.join(tmp, f"{name}.engine")
                eng.save(path)
                compare(f"{name}.reloaded", tfg.load(path, device=DEVICE).run(dict(feeds)), want)
            except Exception as e:          # noqa: BLE001 — a smoke script reports every failure as one line
                line(False, name, f"{type(e).__name__}: {str(e)[:300]}")
    print(f"total {time.perf_counter() - t_all:.1f} s, {len(FAILS)} FAIL")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
