"""In-place aten ops (torchvision writes ReLU(inplace=True), `out += identity`, Hardswish(inplace=True),
Dropout(inplace=True)) and the mobile nets' hardswish / hardsigmoid, through torch.compile(backend="tensorforge")
and tfg.compile, against eager PyTorch (the oracle).

On the H200 at ffb3b2a these were 65 (resnet50) and 51 (mobilenet_v3_large) graph breaks per model, every one an
in-place op or hardsigmoid: the backend ran 5-14x slower than our ONNX engine. Here the same blocks must be one
engine with no break; a hardsigmoid converter given ONNX's default slope (0.2 instead of torch's 1/6) must fail
the comparison; an in-place op on a graph input stays a break that names why, and the caller still sees the write.
"""

import pytest
import torch
import torch.nn as nn

import tensorforge as tfg
import tensorforge.frontend_torch as ft
from tensorforge.frontend_torch import converters, functional

TOL = dict(rtol=1e-4, atol=1e-5)


class Bottleneck(nn.Module):
    """resnet's block as torchvision writes it: in-place ReLU and an in-place residual add."""

    def __init__(self, c=8):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c)
        self.conv2, self.bn2 = nn.Conv2d(c, c, 3, padding=1, bias=False), nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x
        return self.relu(out)


class MobileTail(nn.Module):
    """mobilenet_v3's pieces: Hardswish(inplace), a squeeze-excite gate through Hardsigmoid, Dropout(inplace)."""

    def __init__(self, c=8):
        super().__init__()
        self.stem, self.bn = nn.Conv2d(3, c, 3, padding=1), nn.BatchNorm2d(c)
        self.act = nn.Hardswish(inplace=True)
        self.block = Bottleneck(c)
        self.fc1, self.fc2 = nn.Conv2d(c, 4, 1), nn.Conv2d(4, c, 1)
        self.gate = nn.Hardsigmoid()
        self.drop = nn.Dropout(0.2, inplace=True)
        self.head = nn.Linear(c, 5)

    def forward(self, x):
        y = self.block(self.act(self.bn(self.stem(x))))
        s = self.gate(self.fc2(torch.relu(self.fc1(y.mean((2, 3), keepdim=True)))))
        y = self.act(y * s)
        return self.head(self.drop(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1)))


def _model():
    torch.manual_seed(0)
    m = MobileTail().eval()
    for mod in m.modules():                              # statistics that make batch norm do something
        if isinstance(mod, nn.BatchNorm2d):
            mod.running_mean.uniform_(-0.5, 0.5), mod.running_var.uniform_(0.5, 2.0)
            mod.weight.data.uniform_(0.5, 1.5), mod.bias.data.uniform_(-0.3, 0.3)
    return m


def _inputs():
    torch.manual_seed(1)
    return torch.randn(2, 3, 12, 12) * 3.0, torch.randn(2, 3, 12, 12) * 3.0   # ×3: both hard kinks are crossed


def _dynamo(m, x):
    torch._dynamo.reset()
    return torch.compile(m, backend="tensorforge")(x), ft.last_report()


def test_the_exported_graph_has_in_place_ops():
    """The premise: without functional.py, export hands these ops over in place."""
    m, (x, _) = _model(), _inputs()
    ep = torch.export.export(m, (x,))
    assert functional.mutates(ep.graph_module.graph)
    assert not functional.mutates(functional.functional(ep).graph_module.graph)


def test_in_place_blocks_are_one_engine_and_match_eager():
    m, (x, x2) = _model(), _inputs()
    with torch.no_grad():
        want = m(x.clone())
        out, report = _dynamo(m, x)
        torch.testing.assert_close(out, want, **TOL)
        assert report.breaks == [] and report.engines == 1
        c = tfg.compile(m, (x,))
        assert c.graph_breaks == [] and c.report.engines == 1
        torch.testing.assert_close(c(x), want, **TOL)
        torch.testing.assert_close(c(x2), m(x2.clone()), **TOL)     # a second input: not a cached answer
    ops = c.report.layer_ops()
    assert not any("_" in op for op in ops), ops                     # IR layers only, no aten name leaked


def test_a_wrong_hardsigmoid_slope_is_caught(monkeypatch):
    """ONNX's HardSigmoid defaults (alpha 0.2) differ from torch's (1/6): a converter that forgot to write alpha
    must fail the comparison, so the comparison can fail."""
    def onnx_default_alpha(ctx, node):
        return ctx.add("HardSigmoid", [ctx.t(node.args[0])], node, alpha=0.2, beta=0.5)
    monkeypatch.setitem(converters.TABLE, torch.ops.aten.hardsigmoid.default, onnx_default_alpha)
    m, (x, _) = _model(), _inputs()
    with torch.no_grad():
        c = tfg.compile(m, (x,))
        assert c.graph_breaks == []
        with pytest.raises(AssertionError):
            torch.testing.assert_close(c(x), m(x.clone()), **TOL)


def test_in_place_op_on_an_input_stays_a_named_break():
    class ReluInput(nn.Module):
        def forward(self, x):
            x.relu_()
            return x * 2.0
    x = torch.randn(3, 5)
    with torch.no_grad():
        c = tfg.compile(ReluInput(), (x.clone(),))
        arg = x.clone()
        y = c(arg)
    torch.testing.assert_close(arg, x.relu(), rtol=0, atol=0)        # the caller sees the write
    torch.testing.assert_close(y, x.relu() * 2.0, rtol=0, atol=0)
    assert [op for _, op, _ in c.graph_breaks] == ["aten.relu_.default"]
    assert "graph input or buffer" in c.graph_breaks[0][2]
