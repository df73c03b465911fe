"""GPU smoke of issue 18's graph work on CUDA: the PRelu conv epilogue (FusedConv with a fifth input; the Triton
and cuDNN epilogue tactics must refuse it, the others must run it), written-out HardSwish fused into a conv, and a
Loop body optimised by the passes (MatMulEpilogue inside it) — each against the torch module / numpy closed form,
fp32 and fp16 builds. One PASS/FAIL line per check; exit 1 on any FAIL.
    PYTHONPATH=. python3 bench/gpu_smoke/cpu_speed_rules.py        (≈ 30 s on an H200)
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

import tensorforge as tfg  # noqa: E402
from cpu_models import loop_if_model  # noqa: E402


def _export(module, x) -> bytes:
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), (x,), buf, dynamo=False, opset_version=17, input_names=["input"])
    return buf.getvalue()


class ConvPRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.act = nn.Conv2d(16, 32, 3, padding=1), nn.PReLU(32)
        with torch.no_grad():
            self.act.weight.uniform_(-0.5, 0.9)
        self.conv2 = nn.Conv2d(32, 32, 3, padding=1)

    def forward(self, x):
        y = self.conv2(self.act(self.conv(x)))
        return y * torch.clamp(y + 3, 0, 6) / 6      # HardSwish written out, after conv2


def _loop_reference(feeds, model_bytes):
    """onnxruntime where installed (onnx.reference's Loop returns zeros for this model), else tensorforge's
    unoptimised CPU build (level 0: no pass touches the body)."""
    try:
        import onnxruntime as ort
        return ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    except ImportError:
        return tfg.build(model_bytes, device="cpu", optimization_level=0).run(dict(feeds))["y"]


DEVICE = os.environ.get("SMOKE_DEVICE", "cuda")      # SMOKE_DEVICE=cpu: the same checks on the CPU


def main() -> int:
    checks = []
    torch.manual_seed(0)
    m = ConvPRelu()
    x = torch.randn(2, 16, 56, 56)
    want = m(x).detach().numpy()
    onnx_bytes = _export(m, x)
    for fp16 in (False, True):
        t0 = time.perf_counter()
        if fp16 and DEVICE == "cpu":
            continue
        eng = tfg.build(onnx_bytes, device=DEVICE, fp16=fp16)
        got = list(eng.run({"input": x.numpy()}).values())[0]
        got = got.float().cpu().numpy() if hasattr(got, "cpu") else np.asarray(got, np.float32)
        fused = [(la.op, la.attrs.get("activation"), la.tactic) for la in eng.data.layers if la.op == "FusedConv"]
        tol = 3e-2 if fp16 else 1e-3
        err = float(np.abs(got - want).max())
        checks.append((f"prelu_epilogue_{'fp16' if fp16 else 'fp32'}",
                       np.allclose(got, want, rtol=tol, atol=tol) and any(a == "PRelu" for _, a, _ in fused)
                       and any(a == "HardSwish" for _, a, _ in fused),
                       f"max err {err:.2e}, fused {fused}, {time.perf_counter() - t0:.1f} s"))
        bad = [t for _, a, t in fused if a == "PRelu" and t and ("triton" in t or "cudnn_fused" in t)]
        checks.append((f"prelu_tactic_{'fp16' if fp16 else 'fp32'}", not bad, f"PRelu tactics {[t for _, a, t in fused if a == 'PRelu']}"))
    model = loop_if_model()
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal((32, 64)).astype(np.float32), "h0": np.zeros((1, 128), np.float32)}
    eng = tfg.build(model, device=DEVICE)
    got = list(eng.run(dict(feeds)).values())[0]
    got = got.cpu().numpy() if hasattr(got, "cpu") else np.asarray(got)
    ref = _loop_reference(feeds, model)
    loop = next(la for la in eng.data.layers if la.op == "Loop")
    body_ops = [la.op for la in loop.attrs["body"].layers]
    checks.append(("loop_body_optimised", np.allclose(got, ref, rtol=1e-3, atol=1e-4) and "If" not in body_ops
                   and "MatMulEpilogue" in body_ops, f"body {body_ops}, max err {float(np.abs(got - ref).max()):.2e}"))
    for name, ok, info in checks:
        print(f"{'PASS' if ok else 'FAIL'} {name} {info}")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
