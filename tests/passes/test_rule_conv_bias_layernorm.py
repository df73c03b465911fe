"""Conv(x, w, b) → Transpose → LayerNorm ⇒ Conv(x, w) → Transpose → AddLayerNormalization(·, b)
(passes/rules/conv_bias_layernorm.py): fires on a ConvNeXt block, numerics against onnxruntime and the unfused
build; negative cases with their reasons."""

import numpy as np
import torch

from fusion_helpers import check_fused, export_quiet, feeds_for, ops


class _ConvNeXtBlock(torch.nn.Module):
    """depthwise 7×7 conv (bias) → channels last → LayerNorm → Linear → GELU → Linear → channels first + x."""

    def __init__(self, c=8, read_conv_twice=False):
        super().__init__()
        self.dw = torch.nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = torch.nn.LayerNorm(c, eps=1e-6)
        self.fc1, self.fc2 = torch.nn.Linear(c, 4 * c), torch.nn.Linear(4 * c, c)
        self.read_conv_twice = read_conv_twice
        with torch.no_grad():
            self.dw.bias.uniform_(-2, 2)           # a bias large enough that losing it would show

    def forward(self, x):
        y = self.dw(x)
        t = self.norm(y.permute(0, 2, 3, 1))
        t = self.fc2(torch.nn.functional.gelu(self.fc1(t))).permute(0, 3, 1, 2)
        return x + t + (y if self.read_conv_twice else 0)


def _run(block, seed):
    torch.manual_seed(seed)
    data = export_quiet(block, (torch.randn(2, 8, 5, 6),), opset=17)
    x = np.random.default_rng(seed).standard_normal((2, 8, 5, 6)).astype(np.float32)
    return check_fused(data, feeds_for(data, x))


def test_convnext_block_bias_moves_into_the_layernorm():
    engine, _ = _run(_ConvNeXtBlock(), 0)
    found = ops(engine)
    assert "LayerNormalization" not in found and found.count("AddLayerNormalization") == 1
    conv = next(layer for layer in engine.data.layers if layer.op in ("Conv", "FusedConv"))
    assert conv.op == "Conv" and len(conv.inputs) == 2
    ln = next(layer for layer in engine.data.layers if layer.op == "AddLayerNormalization")
    assert ln.outputs[1] == ""


def test_a_conv_output_read_elsewhere_keeps_its_bias():
    engine, text = _run(_ConvNeXtBlock(read_conv_twice=True), 1)
    assert "AddLayerNormalization" not in ops(engine)
    assert "read elsewhere (it would lose its bias)" in text
