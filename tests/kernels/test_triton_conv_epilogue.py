"""The cuDNN-conv + one-Triton-epilogue tactic (kernels/triton_conv_epilogue.py) under TRITON_INTERPRET=1 on tiny
CPU tensors, against the FusedConv / Conv references: every activation, residual none/before/after, NCHW and
channels-last layouts, float32 and float16, odd sizes; and its supports() reasons."""

import pytest
import torch

from tensorforge.ir import Layer, get_spec
from tensorforge.kernels import candidates
from tensorforge.kernels.triton_conv_epilogue import ConvTritonBias, FusedConvTritonEpilogue, conv_bias_act_

CPU = torch.device("cpu")
CL = torch.channels_last
ACTS = [("none", 0.0, 0.0), ("Relu", 0.0, 0.0), ("Sigmoid", 0.0, 0.0), ("Tanh", 0.0, 0.0), ("LeakyRelu", 0.1, 0.0),
        ("Clip", -0.5, 0.7), ("HardSigmoid", 0.2, 0.5), ("HardSwish", 0.0, 0.0), ("Gelu", 0.0, 0.0),
        ("Gelu", 1.0, 0.0), ("Silu", 0.0, 0.0), ("Elu", 1.0, 0.0)]


def fused_ref(x, w, b=None, r=None, **attrs):
    return get_spec("FusedConv").reference(x, w, b, r, **attrs)


def epilogue_ref(y, bias, r, act, alpha, beta, res_first):
    """The FusedConv reference's epilogue alone: a 1×1 identity convolution leaves y as it is."""
    eye = torch.eye(y.shape[1], dtype=y.dtype).reshape(y.shape[1], y.shape[1], 1, 1)
    return fused_ref(y, eye, bias, r, activation=act, alpha=alpha, beta=beta, residual_first=res_first)


@pytest.mark.parametrize("act,alpha,beta", ACTS)
@pytest.mark.parametrize("channels_last", [False, True])
def test_epilogue_every_activation(act, alpha, beta, channels_last):
    y = torch.randn(2, 3, 5, 1) * 3                       # C = 3, H·W = 5
    bias = torch.randn(3)
    want = epilogue_ref(y, bias, None, act, alpha, beta, 0)
    if channels_last:
        y = y.contiguous(memory_format=CL)
        assert not y.is_contiguous()
    got = conv_bias_act_(y.clone(memory_format=torch.preserve_format), bias, None, act, alpha, beta)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("res_first", [0, 1])
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("res_layout", ["nchw", "nhwc"])
def test_epilogue_residual_before_and_after(res_first, channels_last, res_layout):
    y, bias, r = torch.randn(2, 5, 3, 4), torch.randn(5), torch.randn(2, 5, 3, 4)
    want = epilogue_ref(y, bias, r, "HardSwish", 0.0, 0.0, res_first)
    y = y.contiguous(memory_format=CL) if channels_last else y
    r = r.contiguous(memory_format=CL) if res_layout == "nhwc" else r
    got = conv_bias_act_(y, bias, r, "HardSwish", residual_first=res_first, channels_last=channels_last)
    assert got.data_ptr() == y.data_ptr()                # in place
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("channels_last", [False, True])
def test_epilogue_half_and_no_bias(channels_last):
    y, bias, r = torch.randn(1, 3, 3, 3).half(), torch.randn(3), torch.randn(1, 3, 3, 3).half()
    want = epilogue_ref(y.float(), bias, r.float(), "Silu", 0.0, 0.0, 1)
    y16 = y.contiguous(memory_format=CL) if channels_last else y.clone()
    got = conv_bias_act_(y16, bias, r, "Silu", residual_first=1)   # float32 bias on a float16 y
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.float(), want, rtol=1e-3, atol=1e-3)   # one rounding of float32 math
    plain = conv_bias_act_(y.clone(), None, None, "Relu")
    torch.testing.assert_close(plain, torch.relu(y))


def test_epilogue_rejects_unknown_activation_and_strided_y():
    with pytest.raises(ValueError, match="unknown epilogue activation"):
        conv_bias_act_(torch.randn(1, 2, 2, 2), None, None, "Mish")
    with pytest.raises(ValueError, match="dense"):
        conv_bias_act_(torch.randn(1, 2, 4, 4)[..., ::2], torch.randn(2), None, "Relu")


def layer(op, n_in, **attrs):
    return Layer("l", op, [f"i{k}" for k in range(n_in)], ["y"], attrs)


CONV_CASES = [   # (x shape, w shape, conv attrs)
    ((2, 3, 5, 5), (4, 3, 3, 3), {"pads": [1, 1, 1, 1], "strides": [2, 2]}),
    ((1, 4, 6, 5), (4, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 4, "dilations": [1, 2]}),   # depthwise
    ((1, 3, 5, 4), (5, 3, 2, 2), {"auto_pad": "SAME_UPPER"}),                               # asymmetric pads
    ((1, 2, 1, 5), (3, 2, 1, 1), {}),                                                         # C = 3, H·W = 5
]


@pytest.mark.parametrize("case", range(len(CONV_CASES)))
@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
def test_fused_conv_tactic_matches_reference(case, layout):
    xs, ws, conv_attrs = CONV_CASES[case]
    act, alpha, beta = ACTS[case * 3 % len(ACTS)]
    x, w, b = torch.randn(*xs), torch.randn(*ws), torch.randn(ws[0])
    y_shape = fused_ref(x, w, None, None, **conv_attrs).shape
    attrs = {**conv_attrs, "activation": act, "alpha": alpha, "beta": beta, "residual_first": case % 2}
    for inputs in ([x, w, b], [x, w, b, torch.randn(y_shape)]):
        run = FusedConvTritonEpilogue.build(layer("FusedConv", len(inputs), **attrs), {"layout": layout}, CPU)
        got = run(inputs)[0]
        if layout == "nhwc":
            assert got.is_contiguous(memory_format=CL)
        torch.testing.assert_close(got, fused_ref(*inputs, **attrs), rtol=1e-4, atol=1e-4)


def test_fused_conv_tactic_half_channels_last_input():
    x = torch.randn(1, 3, 5, 5).half().contiguous(memory_format=CL)
    w, b, r = torch.randn(6, 3, 3, 3).half(), torch.randn(6).half(), torch.randn(1, 6, 5, 5).half()
    attrs = {"pads": [1, 1, 1, 1], "activation": "HardSwish"}
    run = FusedConvTritonEpilogue.build(layer("FusedConv", 4, **attrs), {"layout": "nchw"}, CPU)
    got = run([x, w, b, r])[0]
    assert got.dtype == torch.float16 and got.is_contiguous()
    want = fused_ref(x.float(), w.float(), b.float(), r.float(), **attrs)
    torch.testing.assert_close(got.float(), want, rtol=1e-2, atol=1e-2)


def test_conv_with_bias_tactic_matches_reference():
    x, w, b = torch.randn(2, 3, 4, 4), torch.randn(5, 3, 3, 3), torch.randn(5)
    for layout in ("nhwc", "nchw"):
        run = ConvTritonBias.build(layer("Conv", 3, strides=[1, 2]), {"layout": layout}, CPU)
        want = get_spec("Conv").reference(x, w, b, strides=[1, 2])
        torch.testing.assert_close(run([x, w, b])[0], want, rtol=1e-5, atol=1e-5)


def test_supports_reasons():
    cuda = torch.device("cuda")
    ok = layer("FusedConv", 3, kernel_shape=[3, 3], activation="HardSwish")
    assert FusedConvTritonEpilogue.supports(ok, cuda) is None
    assert "CUDA" in FusedConvTritonEpilogue.supports(ok, CPU)
    three_d = layer("FusedConv", 3, kernel_shape=[3, 3, 3], activation="Relu")
    assert "2-D" in FusedConvTritonEpilogue.supports(three_d, cuda)
    assert "2-D" in FusedConvTritonEpilogue.supports(layer("FusedConv", 2, pads=[1, 1, 1, 1, 1, 1]), cuda)
    assert "no Triton epilogue" in FusedConvTritonEpilogue.supports(layer("FusedConv", 3, activation="Mish"), cuda)
    assert "no bias" in ConvTritonBias.supports(layer("Conv", 2), cuda)
    assert "no bias" in ConvTritonBias.supports(Layer("l", "Conv", ["x", "w", ""], ["y"], {}), cuda)
    assert ConvTritonBias.supports(layer("Conv", 3, kernel_shape=[1, 1]), cuda) is None
    found, reasons = candidates(ok, CPU)                  # CPU builds never offer it
    assert "cudnn_triton_epilogue" not in [t.name for t, _ in found]
    assert "CUDA" in reasons["cudnn_triton_epilogue"]


def test_untimed_choice_is_unchanged():
    """Its priority sits below torch_conv (FusedConv) and torch_ref (Conv): level-0 builds keep their tactic."""
    from tensorforge.kernels.registry import _TACTICS
    prio = {(t.op, t.name): t.priority for ts in _TACTICS.values() for t in ts}
    assert prio[("FusedConv", "cudnn_triton_epilogue")] < prio[("FusedConv", "torch_conv")]
    assert prio[("Conv", "cudnn_triton_epilogue")] < prio[("*", "torch_ref")]
