"""The Q/DQ accuracy criterion of issue 12 on the CPU: resnet-style and BERT-style models quantized here by
onnxruntime's quantize_static (QDQ, per-channel weights; 32 calibration inputs distinct from the test inputs).

Oracle: onnxruntime with graph optimisations disabled evaluates every Q and DQ as written (the exact semantics).
Criterion: our fraction of output elements within one output quantization step of it ≥ onnxruntime's default
session (its own int8 kernels) − 2 points, and our maximum error ≤ its maximum + one step. The fusion counts
say the quantized kernels really ran; a deliberately broken fusion must fail the same criterion.
"""

import numpy as np
import pytest
import torch

import tensorforge as tfg
from qdq_models import BertIsh, ResNetish, closeness, ort_outputs, output_step, quantized_model
from tensorforge.passes.rules import qdq as qdq_rule

CASES = {"resnet": (ResNetish, (3, 32, 32), 8, 1), "bert": (BertIsh, (16, 64), 0, 9)}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    out = {}
    for name, (cls, shape, _, _) in CASES.items():
        torch.manual_seed(0)
        out[name] = quantized_model(cls(), torch.randn(1, *shape), tmp_path_factory.mktemp(name) / name)
    return out


def _criterion(path, shape, build=None):
    x = np.random.RandomState(1234).randn(32, *shape).astype(np.float32)    # not the calibration inputs
    exact, default = ort_outputs(path, {"x": x}, False), ort_outputs(path, {"x": x}, True)
    engine = build() if build else tfg.build(path, device="cpu", shapes={"x": ((1, *shape), (32, *shape), (32, *shape))})
    got = engine.run({"x": x})["y"]
    step = output_step(path)
    return engine, closeness(got, exact, step), closeness(default, exact, step)


@pytest.mark.parametrize("name", list(CASES))
def test_qdq_model_meets_the_criterion(models, name):
    cls, shape, n_conv, n_mm = CASES[name]
    engine, (frac, worst), (ort_frac, ort_worst) = _criterion(models[name], shape)
    print(f"{name}: ours {frac:.4f} within 1 step, max {worst:.2f} steps; onnxruntime {ort_frac:.4f}, {ort_worst:.2f}")
    assert frac >= ort_frac - 0.02, (frac, ort_frac)
    assert worst <= ort_worst + 1 + 1e-6, (worst, ort_worst)
    ops = [layer.op for layer in engine.data.layers]
    assert ops.count("QuantizedConv") == n_conv and ops.count("QuantizedMatMul") == n_mm
    assert "Conv" not in ops and "FusedConv" not in ops and "Gemm" not in ops


def test_a_broken_fusion_fails_the_criterion(models, monkeypatch):
    """Ignoring the activation zero point (a plausible bug) is caught by the same criterion."""
    real = qdq_rule.QDQFusion.rewrite

    def broken(self, m, g):
        layers = real(self, m, g)
        layers[-1].attrs["x_zero_point"] = 0
        return layers
    monkeypatch.setattr(qdq_rule.QDQFusion, "rewrite", broken)
    _, (frac, worst), (ort_frac, ort_worst) = _criterion(models["resnet"], CASES["resnet"][1])
    assert frac < ort_frac - 0.02 or worst > ort_worst + 1
