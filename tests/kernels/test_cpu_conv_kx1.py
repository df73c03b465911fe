"""cpu_conv_kx1: K×1 convolutions as conv1d (issue 18.5), against the Conv/FusedConv references and onnxruntime;
its refusal reasons; untimed builds choose it for width-1 inputs only."""

import io
import time
import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch
import torch.nn as nn

import tensorforge as tfg
from tensorforge.ir import Layer, get_spec
from tensorforge.kernels.cpu_conv_kx1 import ConvKx1, FusedConvKx1

CPU = torch.device("cpu")


def _layer(op, n_in, **attrs):
    return Layer("l", op, [f"i{k}" for k in range(n_in)], ["o"], attrs)


@pytest.mark.parametrize("width,strides,dil,group,pads", [(1, [1, 1], [1, 1], 1, [2, 0, 2, 0]),
                                                          (1, [2, 1], [2, 1], 4, [3, 0, 3, 0]),
                                                          (5, [1, 2], [1, 1], 1, [0, 0, 0, 0]),
                                                          (4, [3, 1], [1, 3], 2, [1, 0, 1, 0])])
def test_conv_matches_the_reference(width, strides, dil, group, pads):
    x, w, b = torch.randn(2, 8, 37, width), torch.randn(12, 8 // group, 5, 1), torch.randn(12)
    attrs = dict(kernel_shape=[5, 1], strides=strides, dilations=dil, group=group, pads=pads)
    got = ConvKx1.build(_layer("Conv", 3, **attrs), {}, CPU)([x, w, b])[0]
    want = get_spec("Conv").reference(x, w, b, **attrs)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("act", ["Relu", "PRelu"])
def test_fused_conv_epilogue_matches_the_reference(act):
    x, w, b = torch.randn(1, 6, 40, 1), torch.randn(6, 6, 3, 1), torch.randn(6)
    res, slope = torch.randn(1, 6, 40, 1), torch.rand(6) - 0.5
    attrs = dict(kernel_shape=[3, 1], pads=[1, 0, 1, 0], activation=act, residual_first=0)
    inputs = [x, w, b, res] + ([slope] if act == "PRelu" else [])
    got = FusedConvKx1.build(_layer("FusedConv", len(inputs), **attrs), {}, CPU)(list(inputs))[0]
    want = get_spec("FusedConv").reference(*inputs, **attrs)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("attrs,why", [(dict(kernel_shape=[3, 3]), "is not K×1"),
                                       (dict(kernel_shape=[3, 1], pads=[1, 1, 1, 1]), "pad the width"),
                                       (dict(kernel_shape=[3, 1], pads=[1, 0, 2, 0]), "asymmetric"),
                                       (dict(kernel_shape=[3, 1], auto_pad="SAME_UPPER"), "auto_pad")])
def test_refusals_say_why(attrs, why):
    assert why in ConvKx1.supports(_layer("Conv", 2, **attrs), CPU)


class Tdnn(nn.Module):
    """A speech front end on (N, C, T, 1): 5×1 convolutions over time, ReLU."""

    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(40, 64, (5, 1), padding=(2, 0)), nn.Conv2d(64, 64, (5, 1), padding=(2, 0))

    def forward(self, x):
        return self.c2(torch.relu(self.c1(x)))


def _export(m, x):
    buf = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m.eval(), (x,), buf, dynamo=False, opset_version=17, input_names=["x"])
    return buf.getvalue()


def test_model_chooses_it_and_matches_onnxruntime():
    x = torch.randn(1, 40, 300, 1)
    model = _export(Tdnn(), x)
    engine = tfg.build(model, device="cpu")
    tactics = [la.tactic for la in engine.data.layers]
    assert all(t.endswith("cpu_conv_kx1") for t in tactics), tactics
    want = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0]
    got = list(engine.run({"x": x.numpy()}).values())[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_wider_input_keeps_the_2d_path_in_untimed_builds():
    x = torch.randn(1, 40, 30, 3)
    engine = tfg.build(_export(Tdnn(), x), device="cpu")
    assert not any(la.tactic.endswith("cpu_conv_kx1") for la in engine.data.layers)


def test_faster_than_the_2d_path_on_width_1():
    """Measured, not assumed: median of 15 alternating calls, conv1d lowering vs torch's conv2d."""
    x, w, b = torch.randn(1, 64, 2000, 1), torch.randn(64, 64, 5, 1), torch.randn(64)
    attrs = dict(kernel_shape=[5, 1], pads=[2, 0, 2, 0])
    fast = ConvKx1.build(_layer("Conv", 3, **attrs), {}, CPU)
    ref = get_spec("Conv").reference
    t_fast, t_ref = [], []
    for _ in range(15):
        t0 = time.perf_counter()
        fast([x, w, b])
        t_fast.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ref(x, w, b, **attrs)
        t_ref.append(time.perf_counter() - t0)
    print(f"conv1d {np.median(t_fast) * 1e3:.3f} ms, conv2d {np.median(t_ref) * 1e3:.3f} ms")
    assert np.median(t_fast) < 1.2 * np.median(t_ref)
