"""The channels-last Conv/FusedConv tactics: refused on CPU with their reason, and (built directly, as the GPU would)
the same numbers as the op's reference, with an NHWC-strided result."""

import torch

from tensorforge.ir import Layer, get_spec
from tensorforge.kernels import candidates
from tensorforge.kernels.conv_channels_last import ConvChannelsLast, FusedConvChannelsLast


def test_refused_on_cpu_and_for_3d():
    layer = Layer("c", "Conv", ["x", "w", "b"], ["y"], {"group": 1, "pads": [1, 1, 1, 1], "strides": [1, 1]})
    found, reasons = candidates(layer, torch.device("cpu"))
    assert "cudnn_channels_last" in reasons and "CPU builds keep NCHW" in reasons["cudnn_channels_last"]
    assert all(t.name != "cudnn_channels_last" for t, _ in found)
    conv3d = Layer("c", "Conv", ["x", "w"], ["y"], {"kernel_shape": [3, 3, 3]})
    assert "only 2-D" in ConvChannelsLast.supports(conv3d, torch.device("cuda"))
    assert ConvChannelsLast.supports(layer, torch.device("cuda")) is None


def test_numerics_and_layout():
    torch.manual_seed(0)
    attrs = {"group": 2, "pads": [1, 0, 1, 0], "strides": [2, 1], "dilations": [1, 2]}
    layer = Layer("c", "Conv", ["x", "w", "b"], ["y"], attrs)
    x, w, b = torch.randn(2, 4, 9, 11), torch.randn(6, 2, 3, 3), torch.randn(6)
    kernel = ConvChannelsLast.build(layer, {}, torch.device("cpu"))
    (y,) = kernel([x, w, b])
    torch.testing.assert_close(y, get_spec("Conv").reference(x, w, b, **attrs), rtol=1e-5, atol=1e-5)
    assert y.is_contiguous(memory_format=torch.channels_last) and not y.is_contiguous()
    (y2,) = kernel([x.contiguous(memory_format=torch.channels_last), w, b])       # NHWC in: no conversion needed
    torch.testing.assert_close(y2, y)


def test_fused_conv_with_residual():
    torch.manual_seed(1)
    attrs = {"pads": [1, 1, 1, 1], "activation": "Relu"}
    layer = Layer("c", "FusedConv", ["x", "w", "b", "r"], ["y"], attrs)
    x, w, b, r = torch.randn(1, 3, 8, 8), torch.randn(5, 3, 3, 3), torch.randn(5), torch.randn(1, 5, 8, 8)
    found, reasons = candidates(layer, torch.device("cuda"))
    assert any(t.name == "cudnn_channels_last" for t, _ in found)
    (y,) = FusedConvChannelsLast.build(layer, {}, torch.device("cpu"))([x, w, b, r])
    torch.testing.assert_close(y, get_spec("FusedConv").reference(x, w, b, r, **attrs), rtol=1e-5, atol=1e-5)


def test_cudnn_fused_relu_applies_to_the_resnet_epilogue_only():
    from tensorforge.kernels.conv_cudnn_fused import FusedConvCudnnRelu as T
    cuda = torch.device("cuda")
    base = {"pads": [1, 1, 1, 1], "activation": "Relu", "residual_first": 1}
    ok = Layer("c", "FusedConv", ["x", "w", "b", "r"], ["y"], base)
    assert T.supports(ok, cuda) is None
    assert "CUDA devices only" in T.supports(ok, torch.device("cpu"))
    assert "only ReLU" in T.supports(Layer("c", "FusedConv", ["x", "w"], ["y"], dict(base, activation="Sigmoid")), cuda)
    assert "after the activation" in T.supports(Layer("c", "FusedConv", ["x", "w", "b", "r"], ["y"],
                                                       dict(base, residual_first=0)), cuda)
    assert "symmetric" in T.supports(Layer("c", "FusedConv", ["x", "w"], ["y"], dict(base, pads=[0, 0, 1, 1])), cuda)
