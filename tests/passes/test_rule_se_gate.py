"""Mul(x, gate) → 1×1 Conv ⇒ GatedConv (passes/rules/se_gate.py): fires for squeeze-excite blocks as torchvision's
MobileNetV3 and EfficientNet write them (σ or hard-σ gate; a projection with and without a residual), numerics
against onnxruntime and the unfused build, the engine file round trip, every FusedConv tactic's GatedConv wrapper;
negative cases with their reasons."""

import numpy as np
import pytest
import torch

from fusion_helpers import build_logged, check_fused, export_quiet, feeds_for, ops
from se_blocks import InvertedResidualSE


def _build(module, shape=(2, 8, 7, 7), seed=0):
    torch.manual_seed(seed)
    data = export_quiet(module.eval(), (torch.randn(*shape),), opset=17)
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    engine, text = check_fused(data, feeds_for(data, x))
    return data, x, engine, text


@pytest.mark.parametrize("hard,residual", [(False, True), (True, False)], ids=["sigmoid+residual", "hardsigmoid"])
def test_se_gate_joins_the_projection(hard, residual):
    _, _, engine, _ = _build(InvertedResidualSE(hard=hard, residual=residual))
    gated = [layer for layer in engine.data.layers if layer.op == "GatedConv"]
    assert len(gated) == 1 and "Mul" not in ops(engine) and "PointwiseChain" not in ops(engine)
    assert len(gated[0].inputs) == (5 if residual else 4)      # x, gate, w, bias[, residual]
    assert gated[0].tactic.startswith("gatedconv.mul_")        # on the CPU: the Mul, then the oneDNN/torch conv


def test_gated_conv_survives_the_engine_file(tmp_path):
    data, x, engine, _ = _build(InvertedResidualSE())
    engine.save(tmp_path / "se.tfg")
    import tensorforge as tfg
    loaded = tfg.load(tmp_path / "se.tfg", device="cpu")
    feeds = feeds_for(data, x)
    assert "GatedConv" in ops(loaded)
    np.testing.assert_array_equal(list(loaded.run(dict(feeds)).values())[0],
                                  list(engine.run(dict(feeds)).values())[0])


@pytest.mark.parametrize("module,reason", [
    (InvertedResidualSE(project_kernel=3), "not 1×1"),
    (InvertedResidualSE(gate_readers=2), "has other readers"),
], ids=["3x3-projection", "gated-tensor-read-twice"])
def test_se_gate_rejections(module, reason):
    _, _, engine, text = _build(module)
    assert "GatedConv" not in ops(engine) and reason in text


def test_a_constant_scale_is_not_a_gate():
    class ConstScale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.scale = torch.nn.Conv2d(8, 4, 1), torch.nn.Parameter(torch.rand(1, 8, 1, 1) + 0.5)

        def forward(self, x):
            return self.conv(torch.relu(x) * self.scale)
    torch.manual_seed(0)
    data = export_quiet(ConstScale().eval(), (torch.randn(2, 8, 5, 5),), opset=17)
    engine, text = build_logged(data)
    assert "GatedConv" not in ops(engine) and "not x (N, C, H, W) times a computed gate" in text


def test_every_fused_conv_tactic_has_its_gated_wrapper():
    from tensorforge.kernels import registry
    registry._load_optional()
    fused = {t.name for t in registry.registered("FusedConv")}
    gated = {t.name for t in registry.registered("GatedConv")}
    from tensorforge.kernels.gated_conv import DOMINATED
    assert fused and {"mul_" + n for n in fused - DOMINATED} <= gated and not {"mul_" + n for n in DOMINATED} & gated
    assert ("triton_gated_gemm" in gated) == ("triton_conv1x1" in fused)
