"""FusedConv → GlobalAveragePool ⇒ FusedConvPool (passes/rules/conv_pool.py): fires for a squeeze-excite block
(Y kept: the gate multiplies it) and for a last feature map (Y absent: only the pool reads it), numerics against
onnxruntime and the unfused build; negative cases with their reasons."""

import numpy as np
import torch

from fusion_helpers import check_fused, export_quiet, feeds_for, ops


class _ConvSqueezeExcite(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 8, 3, padding=1)
        self.fc1, self.fc2 = torch.nn.Conv2d(8, 2, 1), torch.nn.Conv2d(2, 8, 1)

    def forward(self, x):
        y = torch.nn.functional.silu(self.conv(x))
        s = torch.sigmoid(self.fc2(torch.relu(self.fc1(torch.nn.functional.adaptive_avg_pool2d(y, 1)))))
        return y * s


class _ConvHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv, self.fc = torch.nn.Conv2d(3, 6, 3, stride=2), torch.nn.Linear(6, 5)

    def forward(self, x):
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(torch.relu(self.conv(x)), 1), 1))


def _pool_layers(engine):
    return [layer for layer in engine.data.layers if layer.op == "FusedConvPool"]


def test_squeeze_excite_pool_fuses_and_keeps_y():
    torch.manual_seed(0)
    data = export_quiet(_ConvSqueezeExcite(), (torch.randn(2, 4, 6, 6),), opset=17)
    x = np.random.default_rng(0).standard_normal((2, 4, 6, 6)).astype(np.float32)
    engine, _ = check_fused(data, feeds_for(data, x))
    fused = _pool_layers(engine)
    assert len(fused) == 1 and "GlobalAveragePool" not in ops(engine)
    assert fused[0].outputs[0] and fused[0].attrs["activation"] == "Silu"


def test_last_feature_map_pool_fuses_without_writing_y():
    torch.manual_seed(1)
    data = export_quiet(_ConvHead(), (torch.randn(2, 3, 9, 9),), opset=17)
    x = np.random.default_rng(1).standard_normal((2, 3, 9, 9)).astype(np.float32)
    engine, _ = check_fused(data, feeds_for(data, x))
    fused = _pool_layers(engine)
    assert len(fused) == 1 and fused[0].outputs[0] == "" and "GlobalAveragePool" not in ops(engine)


def test_pool_of_a_layer_that_is_not_a_convolution_stays():
    data = export_quiet(torch.nn.Sequential(torch.nn.Hardswish(), torch.nn.AdaptiveAvgPool2d(1)),
                        (torch.randn(1, 3, 4, 4),), opset=17)
    x = np.random.default_rng(2).standard_normal((1, 3, 4, 4)).astype(np.float32)
    engine, text = check_fused(data, feeds_for(data, x))
    assert "FusedConvPool" not in ops(engine) and "GlobalAveragePool" in ops(engine)
    assert "not by a FusedConv" in text
