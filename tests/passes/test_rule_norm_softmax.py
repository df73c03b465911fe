"""LayerNorm and Softmax rules on the exporters' real patterns, with their negative cases."""

import numpy as np
import pytest
import torch
import torch.nn as nn

from fusion_helpers import check_fused, export_quiet, feeds_for, ops


class ManualLayerNorm(nn.Module):
    """BERT's original BertLayerNorm: mean, (x−u)², sqrt(var+ε), affine."""

    def __init__(self, n=8, eps=1e-12, axes=(-1,), pow_form=True):
        super().__init__()
        self.w, self.b = nn.Parameter(torch.randn(n)), nn.Parameter(torch.randn(n))
        self.eps, self.axes, self.pow_form = eps, axes, pow_form

    def forward(self, x):
        u = x.mean(self.axes, keepdim=True)
        d = x - u
        v = (d.pow(2) if self.pow_form else d * d).mean(self.axes, keepdim=True)
        return self.w * (d / torch.sqrt(v + self.eps)) + self.b


class CastLayerNorm(nn.Module):
    """Mixed precision: statistics in float32, affine part in the input's type."""

    def __init__(self, n=8):
        super().__init__()
        self.w, self.b = nn.Parameter(torch.randn(n)), nn.Parameter(torch.randn(n))

    def forward(self, x):
        h = x.float()
        u = h.mean(-1, keepdim=True)
        d = h - u
        y = (d / torch.sqrt((d * d).mean(-1, keepdim=True) + 1e-5)).to(x.dtype)
        return y * self.w.to(x.dtype) + self.b.to(x.dtype)


class ManualSoftmax(nn.Module):
    def __init__(self, dim=-1, subtract_max=True):
        super().__init__()
        self.dim, self.subtract_max = dim, subtract_max

    def forward(self, x):
        e = torch.exp(x - x.max(self.dim, keepdim=True).values) if self.subtract_max else torch.exp(x)
        return e / e.sum(self.dim, keepdim=True)


@pytest.mark.parametrize("module,dynamo,opset", [
    (nn.LayerNorm(8), False, 11),                 # no LayerNormalization op before opset 17
    (ManualLayerNorm(), False, 17),
    (ManualLayerNorm(pow_form=False), False, 11),
    (ManualLayerNorm(), True, 18),
])
def test_layernorm_forms_fuse(module, dynamo, opset):
    x = torch.randn(2, 3, 8)
    model = export_quiet(module, (x,), opset=opset, dynamo=dynamo)
    engine, _ = check_fused(model, feeds_for(model, x.numpy()))
    assert ops(engine) == ["LayerNormalization"]
    assert engine.data.layers[0].attrs["axis"] == -1


def test_layernorm_over_two_last_axes():
    x = torch.randn(2, 3, 4)
    model = export_quiet(ManualLayerNorm(n=4, axes=(-2, -1)), (x,), opset=17)
    engine, _ = check_fused(model, feeds_for(model, x.numpy()))
    assert ops(engine) == ["LayerNormalization"] and engine.data.layers[0].attrs["axis"] == -2


def test_layernorm_with_casts_reads_the_half_input():
    x = torch.randn(2, 3, 8).half()
    model = export_quiet(CastLayerNorm().half(), (x,), opset=17)
    engine, _ = check_fused(model, feeds_for(model, x.numpy()), rtol=5e-3, atol=5e-3)
    ln = [layer for layer in engine.data.layers if layer.op == "LayerNormalization"]
    assert len(ln) == 1 and "Cast" not in ops(engine)


def test_layernorm_over_a_middle_axis_is_rejected():
    x = torch.randn(2, 8, 3)
    model = export_quiet(ManualLayerNorm(n=3, axes=(1,)), (x,), opset=17)
    engine, log = check_fused(model, feeds_for(model, x.numpy()))
    assert "LayerNormalization" not in ops(engine)
    assert "the statistics run over axes [1], not over the last axes of a rank-3 tensor" in log


def test_layernorm_with_mismatched_axes_is_rejected():
    class Odd(nn.Module):
        def forward(self, x):
            d = x - x.mean(-1, keepdim=True)
            return d / torch.sqrt((d * d).mean(-2, keepdim=True) + 1e-5)
    x = torch.randn(2, 4, 8)
    model = export_quiet(Odd(), (x,), opset=17)
    engine, log = check_fused(model, feeds_for(model, x.numpy()))
    assert "LayerNormalization" not in ops(engine)
    assert "mean over axes [2] but variance over axes [1]" in log


@pytest.mark.parametrize("dynamo,opset,subtract_max", [(False, 11, True), (False, 17, False), (True, 18, True)])
def test_softmax_forms_fuse(dynamo, opset, subtract_max):
    x = torch.randn(2, 3, 7) * 4
    model = export_quiet(ManualSoftmax(subtract_max=subtract_max), (x,), opset=opset, dynamo=dynamo)
    engine, _ = check_fused(model, feeds_for(model, x.numpy()))
    assert ops(engine) == ["Softmax"] and engine.data.layers[0].attrs["axis"] == -1


def test_softmax_along_a_middle_axis_keeps_its_axis():
    x = torch.randn(2, 5, 3)
    model = export_quiet(ManualSoftmax(dim=1), (x,), opset=17)
    engine, _ = check_fused(model, feeds_for(model, x.numpy()))
    assert ops(engine) == ["Softmax"] and engine.data.layers[0].attrs["axis"] == -2


def test_softmax_with_different_axes_is_rejected():
    class Odd(nn.Module):
        def forward(self, x):
            e = torch.exp(x - x.max(-1, keepdim=True).values)
            return e / e.sum(1, keepdim=True)
    x = torch.randn(2, 5, 3)
    model = export_quiet(Odd(), (x,), opset=17)
    engine, log = check_fused(model, feeds_for(model, x.numpy()))
    assert "Softmax" not in ops(engine)
    assert "max over axes [2] but sum over axes [1]" in log


def test_opset11_softmax_on_unknown_rank_is_restored_to_one_layer():
    """Softmax-11 on a tensor whose rank the importer could not see becomes Flatten/Softmax/Reshape."""
    class Scores(nn.Module):
        def forward(self, x, y):
            return torch.softmax(torch.matmul(x, y), -1)
    x, y = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    model = export_quiet(Scores(), (x, y), opset=11)
    engine, _ = check_fused(model, feeds_for(model, x.numpy(), y.numpy()))
    assert ops(engine) == ["MatMul", "Softmax"]
    assert np.isfinite(engine.run(feeds_for(model, x.numpy(), y.numpy()))[engine.output_names[0]]).all()


def test_opset11_softmax_over_several_axes_stays_flattened():
    """Softmax-11 at axis 1 of a rank-3 tensor normalises over two axes: not a last-axis Softmax."""
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 8
    engine, log = check_fused(model.SerializeToString(), {"x": np.random.randn(2, 3, 4).astype(np.float32)})
    assert "Flatten" in ops(engine)
    assert "Flatten at axis 1 of a rank-3 tensor: the softmax spans several axes" in log
