"""PRelu after a convolution folds into its epilogue (issue 18.4): a per-channel slope becomes FusedConv's PRelu
activation with the slope as the fifth input, one slope value becomes LeakyRelu; checked against onnxruntime
and the unfused build, and the cases that stay unfused record their reason."""

import numpy as np
import pytest
import torch
import torch.nn as nn

from fusion_helpers import check_fused, export_quiet, feeds_for, ops


class ConvPRelu(nn.Module):
    """The face-detection cascades' block (MTCNN's P/R/O-nets): Conv → PRelu(C) → MaxPool, with a residual."""

    def __init__(self, slopes=8, residual=False):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.act = nn.PReLU(slopes)
        with torch.no_grad():
            self.act.weight.uniform_(-0.5, 0.9)     # distinct per channel, negative ones too
        self.residual = residual

    def forward(self, x):
        y = self.act(self.conv(x))
        return y + x.repeat(1, 3, 1, 1)[:, :8] if self.residual else y


@pytest.mark.parametrize("slopes,want", [(8, "PRelu"), (1, "LeakyRelu")])
def test_conv_prelu_becomes_one_fused_conv(slopes, want):
    x = torch.randn(2, 3, 11, 13)
    model = export_quiet(ConvPRelu(slopes), (x,), opset=17)
    engine, _ = check_fused(model, feeds_for(model, x.numpy()))
    assert ops(engine) == ["FusedConv"]
    layer = engine.data.layers[0]
    assert layer.attrs["activation"] == want
    assert len(layer.inputs) == (5 if want == "PRelu" else 3)


def test_conv_prelu_then_residual():
    x = torch.randn(1, 3, 9, 9)
    model = export_quiet(ConvPRelu(8, residual=True), (x,), opset=17)
    engine, _ = check_fused(model, feeds_for(model, x.numpy()))
    fused = [layer for layer in engine.data.layers if layer.op == "FusedConv"]
    assert len(fused) == 1 and fused[0].attrs["activation"] == "PRelu"
    assert "Add" not in ops(engine) and "PRelu" not in ops(engine)


def test_the_oracle_sees_a_wrong_slope(monkeypatch):
    """The check can fail: tactics that drop the slope (plain ReLU) are caught against onnxruntime — torch's
    epilogue and the oneDNN primitives' PRelu post-op (kernels/onednn_capi.py) both broken."""
    from tensorforge.kernels import onednn_capi, torch_fused
    monkeypatch.setattr(torch_fused, "prelu_", lambda y, slope: y.relu_())
    monkeypatch.setattr(onednn_capi.PostOps, "prelu", lambda self, mask, slope_md: self.activation("Relu", 0, 0))
    x = torch.randn(1, 3, 7, 7)
    model = export_quiet(ConvPRelu(8), (x,), opset=17)
    with pytest.raises(AssertionError):
        check_fused(model, feeds_for(model, x.numpy()))


class GemmPRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)
        self.act = nn.PReLU(4)
        with torch.no_grad():
            self.act.weight.copy_(torch.tensor([0.1, -0.2, 0.3, 0.7]))

    def forward(self, x):
        return self.act(self.fc(x))


def test_per_column_slope_after_a_gemm_is_rejected_with_its_reason():
    x = torch.randn(3, 6)
    model = export_quiet(GemmPRelu(), (x,), opset=17)
    engine, log = check_fused(model, feeds_for(model, x.numpy()))
    assert "PRelu" in ops(engine)
    assert "has no epilogue (only Conv's per-channel one)" in log


class ConvPReluComputedSlope(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)

    def forward(self, x, s):
        return torch.nn.functional.prelu(self.conv(x), s.reshape(4))


def test_computed_slope_is_rejected_with_its_reason():
    x, s = torch.randn(1, 3, 5, 5), torch.rand(4)
    model = export_quiet(ConvPReluComputedSlope(), (x, s), opset=17)
    engine, log = check_fused(model, feeds_for(model, x.numpy(), s.numpy()))
    assert "FusedConv" not in ops(engine)
    assert "slope: not a constant" in log


def test_prelu_epilogue_survives_the_engine_file(tmp_path):
    x = torch.randn(1, 3, 6, 6)
    model = export_quiet(ConvPRelu(8), (x,), opset=17)
    engine, _ = check_fused(model, feeds_for(model, x.numpy()))
    engine.save(tmp_path / "prelu.tfg")
    import tensorforge as tfg
    loaded = tfg.load(tmp_path / "prelu.tfg", device="cpu")
    feeds = feeds_for(model, x.numpy())
    np.testing.assert_allclose(list(loaded.run(dict(feeds)).values())[0], list(engine.run(dict(feeds)).values())[0],
                               rtol=1e-6, atol=1e-7)
