"""A ResNet-style stem (conv 7×7/2 → ReLU → MaxPool 3×3/2) and two bottleneck blocks, quantized here by onnxruntime's
quantize_static (QDQ, per-channel weights, 32 calibration inputs), against issue 12's Q/DQ criterion with the
MaxPool on uint8 codes (passes/rules/qdq_pool.py) and no Q/DQ layer left between the quantized layers.

Oracle: onnxruntime with graph optimisations disabled (every Q and DQ as written). Criterion: our fraction of output
elements within one output step ≥ onnxruntime's default session − 2 points, our max error ≤ its max + one step.
"""

import numpy as np
import pytest
import torch

import tensorforge as tfg
from qdq_models import closeness, ort_outputs, output_step, quantized_model

SHAPE = (3, 32, 32)


class _Bottleneck(torch.nn.Module):
    def __init__(self, cin, mid, cout):
        super().__init__()
        self.c1, self.c2 = torch.nn.Conv2d(cin, mid, 1), torch.nn.Conv2d(mid, mid, 3, 1, 1)
        self.c3 = torch.nn.Conv2d(mid, cout, 1)
        self.down = torch.nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x):
        r = x if self.down is None else self.down(x)
        return torch.relu(self.c3(torch.relu(self.c2(torch.relu(self.c1(x))))) + r)


class PoolNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 7, 2, 3)
        self.pool = torch.nn.MaxPool2d(3, 2, 1)
        self.blocks = torch.nn.Sequential(_Bottleneck(16, 8, 32), _Bottleneck(32, 8, 32))

    def forward(self, x):          # the feature map itself: 2048 output elements per image, each one checked
        return self.blocks(self.pool(torch.relu(self.stem(x))))


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    torch.manual_seed(0)
    return quantized_model(PoolNet(), torch.randn(1, *SHAPE), tmp_path_factory.mktemp("pool") / "pool")


def _criterion(model_path):
    x = np.random.RandomState(4321).randn(32, *SHAPE).astype(np.float32)      # not the calibration inputs
    exact, default = ort_outputs(model_path, {"x": x}, False), ort_outputs(model_path, {"x": x}, True)
    engine = tfg.build(model_path, device="cpu", shapes={"x": ((1, *SHAPE), (32, *SHAPE), (32, *SHAPE))})
    got = engine.run({"x": x})["y"]
    step = output_step(model_path)
    (frac, worst), (ort_frac, ort_worst) = closeness(got, exact, step), closeness(default, exact, step)
    print(f"ours {frac:.4f} within 1 step, max {worst:.2f}; onnxruntime {ort_frac:.4f}, {ort_worst:.2f}")
    return engine, frac >= ort_frac - 0.02 and worst <= ort_worst + 1 + 1e-6


def test_quantized_maxpool_model_meets_the_criterion(model_path):
    engine, ok = _criterion(model_path)
    assert ok
    layers = engine.data.layers
    ops = [la.op for la in layers]
    pool = layers[ops.index("MaxPool")]
    stem = next(la for la in layers if pool.inputs[0] in la.outputs)
    assert stem.op == "QuantizedConv" and stem.attrs["y_dtype"] in ("int8", "uint8"), stem.op
    first, last = ops.index("QuantizedConv"), len(ops) - 1 - ops[::-1].index("QuantizedConv")
    between = [op for op in ops[first:last] if op in ("QuantizeLinear", "DequantizeLinear", "Cast")]
    assert not between, ops
    assert ops.count("QuantizedConv") == 8, ops


def test_a_broken_pool_rewrite_fails_the_criterion(model_path, monkeypatch):
    """Pooling the codes with a wrong padding value (a code inside the range, 100, instead of the type's
    minimum, the code of −∞) is a plausible bug the criterion must catch: border windows then read it."""
    from tensorforge.ir import get_spec
    spec = get_spec("MaxPool")
    real = spec.reference

    def zero_padded(x, **a):
        if x.dtype in (torch.int8, torch.uint8) and a.get("pads") and any(a["pads"]):
            p = a["pads"]
            x = torch.nn.functional.pad(x.to(torch.int32), (p[1], p[3], p[0], p[2]), value=100).to(x.dtype)
            a = {**a, "pads": [0] * len(p)}
        return real(x, **a)
    monkeypatch.setattr(spec, "reference", zero_padded)
    _, ok = _criterion(model_path)
    assert not ok
