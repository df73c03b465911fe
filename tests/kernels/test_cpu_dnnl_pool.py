"""cpu_dnnl MaxPool: a oneDNN pooling primitive made once per shape (issue 18), against onnxruntime on one-node
MaxPool models (strides, pads, asymmetric pads, dilations, ceil_mode, auto_pad) with NCHW and channels-last inputs;
the layout it keeps; the refusals; and a check that fails when the window is wrong."""

import numpy as np
import pytest
import torch

import tensorforge as tfg
from oracle import FLOAT, ort_run, single_node_model
from tensorforge.ir import Layer
from tensorforge.kernels import cpu_dnnl_pool as dp
from tensorforge.kernels import onednn_capi

CPU = torch.device("cpu")
pytestmark = pytest.mark.skipif(onednn_capi.library() is None, reason=str(onednn_capi.unavailable_reason()))

CASES = [dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
         dict(kernel_shape=[2, 2], strides=[2, 2]),
         dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
         dict(kernel_shape=[3, 2], strides=[1, 2], pads=[0, 1, 2, 0]),
         dict(kernel_shape=[3, 3], strides=[1, 1], dilations=[2, 2], pads=[2, 2, 2, 2]),
         dict(kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2]),
         dict(kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER")]


def _model(**attrs):
    return single_node_model("MaxPool", [("x", FLOAT, [2, 5, 13, 11])], [("y", FLOAT, None)], opset=17, **attrs)


@pytest.mark.parametrize("attrs", CASES, ids=[str(i) for i in range(len(CASES))])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_matches_onnxruntime(attrs, layout):
    x = np.random.default_rng(0).standard_normal((2, 5, 13, 11)).astype(np.float32)
    want = ort_run(_model(**attrs), {"x": x})["y"]
    xt = torch.from_numpy(x)
    if layout == "nhwc":
        xt = xt.contiguous(memory_format=torch.channels_last)
    run = dp.DnnlMaxPool.build(Layer("p", "MaxPool", ["x"], ["y"], dict(attrs)), {}, CPU)
    y = run([xt])[0]
    assert y.is_contiguous(memory_format=torch.channels_last if layout == "nhwc" else torch.contiguous_format)
    np.testing.assert_array_equal(y.numpy(), want)                       # a max: exact


def test_a_model_chooses_it_and_a_wrong_window_is_caught():
    attrs = CASES[0]
    model = _model(**attrs)
    x = np.random.default_rng(1).standard_normal((2, 5, 13, 11)).astype(np.float32)
    engine = tfg.build(model, device="cpu")
    assert [la.tactic for la in engine.data.layers] == ["maxpool.cpu_dnnl"]
    want = ort_run(model, {"x": x})["y"]
    np.testing.assert_array_equal(np.asarray(engine.run({"x": x})["y"]), want)
    wrong = dp.DnnlMaxPool.build(Layer("p", "MaxPool", ["x"], ["y"], dict(attrs, pads=[0, 0, 2, 2])), {}, CPU)
    assert not np.array_equal(wrong([torch.from_numpy(x)])[0].numpy(), want)


def test_refusals_say_why():
    layer = Layer("p", "MaxPool", ["x"], ["y"], dict(kernel_shape=[3, 3]))
    assert "CPU tactic" in dp.DnnlMaxPool.supports(layer, torch.device("cuda"))
    assert "2-D" in dp.DnnlMaxPool.supports(Layer("p", "MaxPool", ["x"], ["y"], dict(kernel_shape=[3])), CPU)
    assert "float32" in dp.DnnlMaxPool.fits(layer, {}, [torch.zeros(1, 2, 5, 5, dtype=torch.int8)])
    assert "4-D" in dp.DnnlMaxPool.fits(layer, {}, [torch.zeros(1, 2, 5)])
    assert "dense" in dp.DnnlMaxPool.fits(layer, {}, [torch.zeros(1, 2, 10, 10)[..., ::2]])
    with pytest.raises(ValueError, match="does not take"):
        dp.DnnlMaxPool.build(layer, {}, CPU)([torch.zeros(1, 2, 5)])
