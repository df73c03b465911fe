"""GPU smoke of issue 18's runtime changes on CUDA: Loop/If/Scan bodies run as pre-planned slot programs
(kernels/subnetwork.py) and engine outputs come back row-major whatever layout the last kernel wrote (a
channels-last cuDNN convolution). Each check against onnxruntime (CPU) or the torch module; fp32 builds.
One PASS/FAIL line per check; exit 1 on any FAIL.
    PYTHONPATH=. python3 bench/gpu_smoke/cpu_speed_bodies.py        (≈ 30 s on an H200)
"""

import io
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

import tensorforge as tfg  # noqa: E402
from cpu_models import loop_if_model  # noqa: E402

DEVICE = os.environ.get("SMOKE_DEVICE", "cuda")      # SMOKE_DEVICE=cpu: the same checks on the CPU


def _ort(model: bytes, feeds: dict):
    import onnxruntime as ort
    return ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, feeds)


def _host(t):
    return t.detach().float().cpu().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)


def _scan_model() -> bytes:
    vi = helper.make_tensor_value_info
    body = helper.make_graph([helper.make_node("Add", ["a_in", "xt"], ["a_out"]),
                              helper.make_node("Tanh", ["a_out"], ["y"])], "body",
                             [vi("a_in", TensorProto.FLOAT, [8]), vi("xt", TensorProto.FLOAT, [8])],
                             [vi("a_out", TensorProto.FLOAT, [8]), vi("y", TensorProto.FLOAT, [8])])
    g = helper.make_graph([helper.make_node("Scan", ["a0", "xs"], ["a", "ys"], body=body, num_scan_inputs=1,
                                            scan_input_directions=[1])], "scan",
                          [vi("a0", TensorProto.FLOAT, [8]), vi("xs", TensorProto.FLOAT, [20, 8])],
                          [vi("a", TensorProto.FLOAT, None), vi("ys", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def main() -> int:
    checks = []
    rng = np.random.default_rng(1)
    for name, model, feeds in (
            ("loop_if", loop_if_model(), {"x": rng.standard_normal((32, 64)).astype(np.float32),
                                          "h0": np.zeros((1, 128), np.float32)}),
            ("scan_reversed", _scan_model(), {"a0": rng.standard_normal(8).astype(np.float32),
                                              "xs": rng.standard_normal((20, 8)).astype(np.float32)})):
        t0 = time.perf_counter()
        want = _ort(model, feeds)
        eng = tfg.build(model, device=DEVICE)
        got = eng.run(dict(feeds))
        errs = [float(np.abs(_host(got[n]) - w).max()) for n, w in zip(eng.output_names, want)]
        ok = all(np.allclose(_host(got[n]), w, rtol=1e-3, atol=1e-4) for n, w in zip(eng.output_names, want))
        checks.append((f"body_program_{name}", ok, f"max err {max(errs):.2e}, {time.perf_counter() - t0:.1f} s"))
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(16, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1)).eval()
    x = torch.randn(4, 16, 56, 56)
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, (x,), buf, dynamo=False, opset_version=17, input_names=["input"])
    eng = tfg.build(buf.getvalue(), device=DEVICE, tf32=False)
    out = next(iter(eng.run({"input": x.to(DEVICE)}).values()))
    want = m(x).detach().numpy()
    tactics = [la.tactic for la in eng.data.layers]
    checks.append(("outputs_dense", out.is_contiguous() and np.allclose(_host(out), want, rtol=1e-3, atol=1e-4),
                   f"last tactic {tactics[-1]}, max err {float(np.abs(_host(out) - want).max()):.2e}"))
    for name, ok, info in checks:
        print(f"{'PASS' if ok else 'FAIL'} {name} {info}")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
