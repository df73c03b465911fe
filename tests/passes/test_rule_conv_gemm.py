"""BatchNorm folding into Conv, bias/activation/residual epilogues of Conv, MatMul and Gemm, and 1×1 convolutions
on a 1×1 image as GEMMs."""

import numpy as np
import pytest
import torch
import torch.nn as nn

from fusion_helpers import check_fused, export_quiet, feeds_for, ops


def _bn(c):
    bn = nn.BatchNorm2d(c)
    bn.running_mean.normal_()
    bn.running_var.uniform_(0.5, 2.0)
    bn.weight.data.normal_()
    bn.bias.data.normal_()
    return bn


class ResBlock(nn.Module):
    """ResNet's basic block: relu(bn(conv(x))) → bn(conv(·)) + x → relu."""

    def __init__(self, c=4, act=nn.ReLU):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1, bias=False), _bn(c)
        self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1, bias=False), _bn(c)
        self.act = act()

    def forward(self, x):
        return torch.relu(self.b2(self.c2(self.act(self.b1(self.c1(x))))) + x)


@pytest.mark.parametrize("dynamo,opset", [(False, 11), (True, 18)])
def test_resnet_block_becomes_two_fused_convs(dynamo, opset):
    x = torch.randn(1, 4, 6, 6)
    kw = {} if dynamo else {"do_constant_folding": False}     # keep BatchNormalization in the legacy export
    model = export_quiet(ResBlock().eval(), (x,), opset=opset, dynamo=dynamo, **kw)
    engine, _ = check_fused(model, feeds_for(model, x.numpy()))
    assert ops(engine) == ["FusedConv", "FusedConv"]
    first, second = engine.data.layers
    assert first.attrs["activation"] == "Relu" and len(first.inputs) == 3          # bias from the folded BN
    assert second.attrs["activation"] == "Relu" and second.attrs["residual_first"] == 1 and len(second.inputs) == 4
    # the dynamo exporter folds BatchNormalization itself; the legacy one keeps it without constant folding
    assert engine.data.build_info["passes"]["fold-conv-bn"] == (0 if dynamo else 2)


@pytest.mark.parametrize("act", [nn.ReLU6, nn.Hardswish, nn.SiLU, nn.Sigmoid])
def test_conv_activations(act):
    x = torch.randn(1, 4, 5, 5)
    model = export_quiet(ResBlock(act=act).eval(), (x,), opset=17, do_constant_folding=False)
    engine, _ = check_fused(model, feeds_for(model, x.numpy()))
    want = {nn.ReLU6: "Clip", nn.Hardswish: "HardSwish", nn.SiLU: "Silu", nn.Sigmoid: "Sigmoid"}[act]
    assert ops(engine) == ["FusedConv", "FusedConv"] and engine.data.layers[0].attrs["activation"] == want


def test_batchnorm_without_conv_is_rejected_with_its_reason():
    class BNOnly(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = _bn(3)

        def forward(self, x):
            return self.bn(x + 1)
    x = torch.randn(1, 3, 4, 4)
    model = export_quiet(BNOnly().eval(), (x,), opset=17, do_constant_folding=False)
    engine, log = check_fused(model, feeds_for(model, x.numpy()))
    assert "BatchNormalization" in ops(engine)
    assert "BN(Conv(x, w) + b) ⇒ Conv" in log and "expected Conv producing" in log and "found Add" in log


class FFN(nn.Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.up, self.down, self.approximate = nn.Linear(8, 16), nn.Linear(16, 8), approximate

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(x), approximate=self.approximate))


@pytest.mark.parametrize("shape,dynamo,opset,approximate", [
    ((2, 3, 8), False, 11, "none"),      # MatMul + Add(bias)
    ((4, 8), False, 17, "tanh"),         # Gemm(transB=1) with C
    ((2, 3, 8), True, 18, "none"),
])
def test_transformer_ffn_epilogues(shape, dynamo, opset, approximate):
    x = torch.randn(*shape)
    model = export_quiet(FFN(approximate), (x,), opset=opset, dynamo=dynamo)
    engine, _ = check_fused(model, feeds_for(model, x.numpy()))
    assert ops(engine) == ["MatMulEpilogue", "MatMulEpilogue"]
    up, down = engine.data.layers
    assert up.attrs["activation"] == "Gelu" and up.attrs["alpha"] == (1.0 if approximate == "tanh" else 0.0)
    assert down.attrs["activation"] == "none" and down.inputs[3] == engine.input_names[0]   # the residual x


def test_bias_that_is_not_per_column_is_rejected():
    class RowBias(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(8, 5))
            self.b = nn.Parameter(torch.randn(4, 1))

        def forward(self, x):
            return torch.relu(torch.matmul(x, self.w) + self.b)
    x = torch.randn(4, 8)
    model = export_quiet(RowBias(), (x,), opset=17)
    engine, log = check_fused(model, feeds_for(model, x.numpy()))
    assert "MatMulEpilogue" not in ops(engine)
    assert "is not one value per output channel (5)" in log


class Conv1D(nn.Module):
    """GPT-2's Conv1D: addmm(b, x.view(−1, K), W).view(…, N), then GELU-tanh and the residual."""

    def __init__(self, k=8, n=8, merge_heads=False):
        super().__init__()
        self.w, self.b, self.merge_heads = nn.Parameter(torch.randn(k, n)), nn.Parameter(torch.randn(n)), merge_heads

    def forward(self, x, r):
        size_out = r.size()
        h = torch.addmm(self.b, x.reshape(-1, self.w.shape[0]), self.w).view(size_out)
        return nn.functional.gelu(h, approximate="tanh") + r


@pytest.mark.parametrize("x_shape,dynamo,opset", [((2, 3, 8), False, 11), ((2, 3, 8), True, 18),
                                                  ((2, 3, 2, 4), False, 17)])     # heads merged by the reshape
def test_gpt2_conv1d_becomes_one_matmul_epilogue(x_shape, dynamo, opset):
    x, r = torch.randn(*x_shape), torch.randn(2, 3, 8)
    model = export_quiet(Conv1D(), (x, r), opset=opset, dynamo=dynamo)
    engine, _ = check_fused(model, feeds_for(model, x.numpy(), r.numpy()))
    fused = [layer for layer in engine.data.layers if layer.op == "MatMulEpilogue"]
    assert len(fused) == 1 and "Gemm" not in ops(engine)
    assert fused[0].attrs["activation"] == "Gelu" and fused[0].attrs["alpha"] == 1.0 and len(fused[0].inputs) == 4


def test_gemm_through_reshape_with_alpha_is_rejected():
    from onnx import TensorProto, helper, numpy_helper
    import numpy as np
    w = numpy_helper.from_array(np.random.randn(8, 5).astype(np.float32), "w")
    shape_in = numpy_helper.from_array(np.array([-1, 8], np.int64), "shape_in")
    shape_out = numpy_helper.from_array(np.array([2, 3, 5], np.int64), "shape_out")
    nodes = [helper.make_node("Reshape", ["x", "shape_in"], ["rows"]),
             helper.make_node("Gemm", ["rows", "w"], ["prod"], alpha=2.0),
             helper.make_node("Reshape", ["prod", "shape_out"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, shape_in, shape_out])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    engine, log = check_fused(model.SerializeToString(), {"x": np.random.randn(2, 3, 8).astype(np.float32)})
    assert "Gemm" in ops(engine) and "Gemm with transA=1 or alpha ≠ 1" in log


class _SqueezeExcite(torch.nn.Module):
    """x · hardsigmoid(W2 · relu(W1 · mean(x) + b1) + b2), MobileNetV3's block, on a 1×1 pooled image."""

    def __init__(self, c=8, r=4):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Conv2d(c, r, 1), torch.nn.Conv2d(r, c, 1)

    def forward(self, x):
        s = torch.nn.functional.adaptive_avg_pool2d(x, 1)
        s = torch.nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(s))))
        return x * s


def test_point_convolutions_on_a_pooled_image_become_gemms():
    torch.manual_seed(0)
    data = export_quiet(_SqueezeExcite(), (torch.randn(2, 8, 5, 5),), opset=17)
    x = np.random.default_rng(0).standard_normal((2, 8, 5, 5)).astype(np.float32)
    engine, _ = check_fused(data, feeds_for(data, x))
    found = ops(engine)
    assert "FusedConv" not in found and "Conv" not in found and found.count("TwoLayerMLP") == 1   # both GEMMs
    mlp = next(layer for layer in engine.data.layers if layer.op == "TwoLayerMLP")      # (two_layer_mlp.py)
    assert (mlp.attrs["activation1"], mlp.attrs["activation2"]) == ("Relu", "HardSigmoid")


def test_point_convolution_on_a_real_image_stays():
    data = export_quiet(torch.nn.Sequential(torch.nn.Conv2d(4, 6, 1), torch.nn.ReLU()), (torch.randn(1, 4, 3, 3),),
                        opset=17)
    x = np.random.default_rng(1).standard_normal((1, 4, 3, 3)).astype(np.float32)
    engine, text = check_fused(data, feeds_for(data, x))
    assert "FusedConv" in ops(engine) and "the input or output image is not 1×1" in text


class PatchEmbed(nn.Module):
    """ViT's / ConvNeXt's patch embedding: Conv(kernel = stride) → [ReLU] → flatten(2) → transpose(1, 2)."""

    def __init__(self, cin=3, cout=12, k=4, stride=None, act=False):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, k, stride=stride or k)
        self.act = act

    def forward(self, x):
        y = self.conv(x)
        return (torch.relu(y) if self.act else y).flatten(2).transpose(1, 2)


def _patch(shape=(2, 3, 8, 12), **kw):
    torch.manual_seed(1)
    x = torch.randn(*shape)
    model = export_quiet(PatchEmbed(cin=shape[1], **kw).eval(), (x,), opset=17, dynamo=False)
    return check_fused(model, feeds_for(model, x.numpy()))


@pytest.mark.parametrize("act", [False, True])
def test_patch_embedding_on_three_channels_is_a_gemm(act):
    """Conv 4×4 / 4 over an RGB 8×12 image (2 × 3 patches of 48 values): the conv goes, one MatMulEpilogue on the
    patch rows takes the bias (and the ReLU), and the transposes around it are views of its rows."""
    engine, _ = _patch(act=act)
    names = ops(engine)
    assert "Conv" not in names and "FusedConv" not in names and names.count("MatMulEpilogue") == 1, names
    gemm = next(la for la in engine.data.layers if la.op == "MatMulEpilogue")
    assert engine.data.constants[gemm.inputs[1]].shape == (12, 48) and len(gemm.inputs) == 3
    assert gemm.attrs["activation"] == ("Relu" if act else "none")


@pytest.mark.parametrize("kw,why", [({"shape": (2, 8, 8, 12)}, "a multiple of 8"),
                                   ({"stride": 2}, "windows overlap or skip"),
                                   ({"shape": (2, 3, 9, 12)}, "not a whole number of 4×4 patches")])
def test_patch_convolutions_that_stay_convolutions(kw, why):
    engine, log = _patch(**kw)
    assert any(op in ops(engine) for op in ("Conv", "FusedConv")) and why in log
