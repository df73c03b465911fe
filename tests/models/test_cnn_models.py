"""torchvision-style networks at toy sizes, exported by both torch exporters, built, checked against onnxruntime.

Written here (torchvision is not installed) after torchvision's building blocks, with random weights and random
BatchNorm statistics: a ResNet (BasicBlock + Bottleneck), a MobileNetV3 inverted residual (depthwise conv,
HardSwish, squeeze-excitation with HardSigmoid), an EfficientNet MBConv (SiLU, squeeze-excitation), a ConvNeXt
stage (depthwise 7×7, permute, LayerNorm, GELU, layer scale) and a ViT (patch embedding, class token, one
encoder block with multi-head attention). Each goes through the legacy exporter at opsets 11 and 17 and the
dynamo exporter at opset 18; two are also built with a dynamic batch dimension and run at two batch sizes.
"""

import numpy as np
import onnx
import pytest
import torch
import torch.nn as nn

from model_checks import MIN_SENSITIVITY, input_sensitivity
from oracle import assert_close, check_against_ort, export, ort_run

import tensorforge as tfg


def conv_bn(cin, cout, k=3, stride=1, groups=1, act=nn.ReLU):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, act()) if act else nn.Sequential(*layers)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(conv_bn(cin, cout, 3, stride), conv_bn(cout, cout, 3, act=None))
        self.down = conv_bn(cin, cout, 1, stride, act=None) if stride != 1 or cin != cout else nn.Identity()

    def forward(self, x):
        return torch.relu(self.body(x) + self.down(x))


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        self.body = nn.Sequential(conv_bn(cin, width, 1), conv_bn(width, width, 3, stride),
                                  conv_bn(width, width * 4, 1, act=None))
        self.down = conv_bn(cin, width * 4, 1, stride, act=None)

    def forward(self, x):
        return torch.relu(self.body(x) + self.down(x))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 7, 2, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(BasicBlock(8, 8, 1), BasicBlock(8, 16, 2), Bottleneck(16, 4, 2))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))

    def forward(self, x):
        return self.head(self.layers(self.stem(x)))


class SqueezeExcite(nn.Module):
    def __init__(self, c, squeezed, act, gate):
        super().__init__()
        self.pool, self.fc1, self.act = nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, squeezed, 1), act()
        self.fc2, self.gate = nn.Conv2d(squeezed, c, 1), gate()

    def forward(self, x):
        return x * self.gate(self.fc2(self.act(self.fc1(self.pool(x)))))


class MobileNetV3Block(nn.Module):
    """Inverted residual: expand 1×1 → depthwise 3×3 → SE (ReLU, HardSigmoid) → project 1×1, + residual."""

    def __init__(self, c=8, expand=24):
        super().__init__()
        self.stem = conv_bn(3, c, 3, 2, act=nn.Hardswish)
        self.block = nn.Sequential(conv_bn(c, expand, 1, act=nn.Hardswish),
                                   conv_bn(expand, expand, 3, groups=expand, act=nn.Hardswish),
                                   SqueezeExcite(expand, 8, nn.ReLU, nn.Hardsigmoid), conv_bn(expand, c, 1, act=None))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(c, 16), nn.Hardswish(),
                                  nn.Dropout(0.2), nn.Linear(16, 10))

    def forward(self, x):
        x = self.stem(x)
        return self.head(x + self.block(x))


class MBConv(nn.Module):
    """EfficientNet MBConv: expand 1×1 (SiLU) → depthwise 5×5 stride 2 (SiLU) → SE (SiLU, Sigmoid) → project."""

    def __init__(self):
        super().__init__()
        self.stem = conv_bn(3, 8, 3, 2, act=nn.SiLU)
        self.block = nn.Sequential(conv_bn(8, 32, 1, act=nn.SiLU), conv_bn(32, 32, 5, 2, groups=32, act=nn.SiLU),
                                   SqueezeExcite(32, 4, nn.SiLU, nn.Sigmoid), conv_bn(32, 16, 1, act=None))
        self.head = nn.Sequential(conv_bn(16, 32, 1, act=nn.SiLU), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Dropout(0.2), nn.Linear(32, 10))

    def forward(self, x):
        return self.head(self.block(self.stem(x)))


class LayerNorm2d(nn.LayerNorm):
    """torchvision's channels-first LayerNorm: permute to NHWC, normalise over C, permute back."""

    def forward(self, x):
        return super().forward(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


class ConvNeXtBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm, self.fc1, self.act, self.fc2 = nn.LayerNorm(c, eps=1e-6), nn.Linear(c, 4 * c), nn.GELU(), nn.Linear(4 * c, c)
        self.layer_scale = nn.Parameter(torch.rand(c, 1, 1) + 0.5)

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.fc2(self.act(self.fc1(self.norm(y)))).permute(0, 3, 1, 2)
        return x + self.layer_scale * y


class ConvNeXt(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, c, 4, 4), LayerNorm2d(c, eps=1e-6))
        self.blocks = nn.Sequential(ConvNeXtBlock(c), ConvNeXtBlock(c))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), LayerNorm2d(c, eps=1e-6), nn.Flatten(1), nn.Linear(c, 10))

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)))


class Attention(nn.Module):
    """Multi-head self-attention written out (timm-style): qkv projection, softmax(q·kᵀ/√d)·v, output projection.
    (nn.MultiheadAttention exports only from opset 13: it uses aten::unflatten.)"""

    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.qkv, self.proj = heads, nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        b, n, d = x.shape
        q, k, v = self.qkv(x).reshape(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        attn = (q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5).softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(b, n, d))


class ViT(nn.Module):
    """Patch embedding (conv 4×4 stride 4), class token, position embedding, one pre-norm encoder block."""

    def __init__(self, d=16, heads=2, patches=16):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 4, 4)
        self.cls = nn.Parameter(torch.randn(1, 1, d))
        self.pos = nn.Parameter(torch.randn(1, patches + 1, d) * 0.1)
        self.ln1, self.attn = nn.LayerNorm(d, eps=1e-6), Attention(d, heads)
        self.ln2 = nn.LayerNorm(d, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Dropout(0.1), nn.Linear(2 * d, d))
        self.ln, self.head = nn.LayerNorm(d, eps=1e-6), nn.Linear(d, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return self.head(self.ln(x)[:, 0])


MODELS = {"resnet": ResNet, "mobilenet_v3": MobileNetV3Block, "efficientnet": MBConv, "convnext": ConvNeXt,
          "vit": ViT}
EXPORTS = [(False, 11), (False, 17), (True, 18)]


def make(name):
    """The model with He-normal weights (PyTorch's default init shrinks activations layer by layer until, in the
    MBConv net, the output hardly depends on the input: 3.5× the tolerance between two inputs) and random
    BatchNorm statistics."""
    torch.manual_seed(0)
    model = MODELS[name]()
    for m in model.modules():      # random statistics, so BatchNorm is not the identity
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.normal_(0, 0.2)
            m.running_var.uniform_(0.5, 1.5)
    return model.eval()


def check_cnn(name, dynamo, opset, tmp_path=None):
    """The comparison of test_cnn_model (also called by test_mutation.py): export, build, compare with onnxruntime
    (built and reloaded) and with the PyTorch module, then on a second input whose output must differ from the
    first by ≥ 100× the tolerance (so an input-independent output cannot pass); raises AssertionError."""
    model, x = make(name), torch.randn(1, 3, 16, 16)
    onnx_bytes = export(model, (x,), opset=opset, dynamo=dynamo, input_names=["x"], output_names=["y"])
    engine = check_against_ort(onnx_bytes, {"x": x.numpy()}, tmp_path=tmp_path)
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(engine.run({"x": x.numpy()})["y"], want, rtol=1e-3, atol=1e-4)
    x2 = np.random.default_rng(2).standard_normal((1, 3, 16, 16)).astype(np.float32)
    want2 = ort_run(onnx_bytes, {"x": x2})
    assert input_sensitivity(want, want2["y"]) >= MIN_SENSITIVITY, f"{name}: the output hardly depends on the input"
    assert_close(engine.run({"x": x2}), want2, what=f"{name} second input: ")
    return engine


@pytest.mark.parametrize("dynamo,opset", EXPORTS, ids=["legacy11", "legacy17", "dynamo18"])
@pytest.mark.parametrize("name", list(MODELS))
def test_cnn_model(name, dynamo, opset, tmp_path):
    check_cnn(name, dynamo, opset, tmp_path)


@pytest.mark.parametrize("name", ["resnet", "vit"])
def test_dynamic_batch(name):
    """dynamic_axes batch: one engine for batches 1..4 (opt 2), run at batch 1 and 3 against onnxruntime."""
    model = make(name)
    onnx_bytes = export(model, (torch.randn(2, 3, 16, 16),), opset=17, input_names=["x"], output_names=["y"],
                        dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    dims = [d.dim_param or d.dim_value for d in onnx.load_from_string(onnx_bytes).graph.input[0].type.tensor_type.shape.dim]
    assert dims[0] == "batch"
    engine = tfg.build(onnx_bytes, device="cpu", shapes={"x": ((1, 3, 16, 16), (2, 3, 16, 16), (4, 3, 16, 16))})
    assert engine.data.inputs[0].shape[0] == -1
    for batch in (1, 3):
        x = np.random.default_rng(batch).standard_normal((batch, 3, 16, 16)).astype(np.float32)
        assert_close(engine.run({"x": x}), ort_run(onnx_bytes, {"x": x}), what=f"batch {batch}: ")
