"""The TensorRT-style layer-by-layer network API: hand-written networks against torch references.

Each network is built with NetworkDefinition.add_*, compiled with build_serialized_network, deserialized and
run through IExecutionContext with host pointers; the torch functional ops of the same math are the oracle.
"""

import numpy as np
import torch
import torch.nn.functional as F

import tensorforge as trt
from trt_helpers import LOGGER, rand, run_network

def test_mlp_matches_torch_at_two_batch_sizes():
    w1, b1, w2, b2 = rand(16, 32, seed=1), rand(1, 32, seed=2), rand(32, 10, seed=3), rand(1, 10, seed=4)
    network = trt.Builder(LOGGER).create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    x = network.add_input("x", trt.float32, (-1, 16))
    h = x
    for w, b, act in ((w1, b1, trt.ActivationType.RELU), (w2, b2, None)):
        wt = network.add_constant(w.shape, trt.Weights(w)).get_output(0)
        mm = network.add_matrix_multiply(h, trt.MatrixOperation.NONE, wt, trt.MatrixOperation.NONE)
        bias = network.add_constant(b.shape, b).get_output(0)
        h = network.add_elementwise(mm.get_output(0), bias, trt.ElementWiseOperation.SUM).get_output(0)
        if act is not None:
            h = network.add_activation(h, act).get_output(0)
    soft = network.add_softmax(h)
    soft.axes = 1 << 1
    soft.get_output(0).name = "probs"
    network.mark_output(soft.get_output(0))
    assert tuple(soft.get_output(0).shape) == (-1, 10) and soft.get_output(0).dtype == trt.DataType.FLOAT
    for batch in (3, 7):
        xs = rand(batch, 16, seed=batch)
        got = run_network(network, {"x": xs}, {"x": ((1, 16), (4, 16), (8, 16))})["probs"]
        t = torch.from_numpy
        want = torch.softmax(torch.relu(t(xs) @ t(w1) + t(b1)) @ t(w2) + t(b2), dim=1).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def _conv(network, x, w, b, stride=1, pad=1):
    layer = network.add_convolution_nd(x, w.shape[0], w.shape[2:], trt.Weights(w), trt.Weights(b))
    layer.stride_nd = (stride, stride)
    layer.padding_nd = (pad, pad)
    return layer.get_output(0)


def test_resnet_basic_block_matches_torch():
    """conv3x3(s2)-relu-conv3x3 + conv1x1(s2) shortcut, relu, maxpool, global average via reduce."""
    c_in, c_out = 4, 8
    w1, b1 = rand(c_out, c_in, 3, 3, seed=1) * 0.3, rand(c_out, seed=2)
    w2, b2 = rand(c_out, c_out, 3, 3, seed=3) * 0.3, rand(c_out, seed=4)
    ws, bs = rand(c_out, c_in, 1, 1, seed=5), rand(c_out, seed=6)
    network = trt.Builder(LOGGER).create_network(0)
    x = network.add_input("x", trt.float32, (-1, c_in, 12, 12))
    y = network.add_activation(_conv(network, x, w1, b1, stride=2), trt.ActivationType.RELU).get_output(0)
    y = _conv(network, y, w2, b2)
    short = _conv(network, x, ws, bs, stride=2, pad=0)
    y = network.add_elementwise(y, short, trt.ElementWiseOperation.SUM).get_output(0)
    y = network.add_activation(y, trt.ActivationType.RELU).get_output(0)
    pool = network.add_pooling_nd(y, trt.PoolingType.MAX, (2, 2))
    pool.stride_nd = (2, 2)
    assert tuple(pool.get_output(0).shape) == (-1, c_out, 3, 3)
    gap = network.add_reduce(pool.get_output(0), trt.ReduceOperation.AVG, (1 << 2) | (1 << 3), keep_dims=False)
    gap.get_output(0).name = "features"
    network.mark_output(gap.get_output(0))
    xs = rand(2, c_in, 12, 12, seed=9)
    got = run_network(network, {"x": xs}, {"x": ((1, c_in, 12, 12), (2, c_in, 12, 12), (4, c_in, 12, 12))})
    t = torch.from_numpy
    r = F.relu(F.conv2d(t(xs), t(w1), t(b1), stride=2, padding=1))
    r = F.conv2d(r, t(w2), t(b2), padding=1) + F.conv2d(t(xs), t(ws), t(bs), stride=2)
    want = F.max_pool2d(F.relu(r), 2, 2).mean(dim=(2, 3)).numpy()
    np.testing.assert_allclose(got["features"], want, rtol=1e-4, atol=1e-5)
