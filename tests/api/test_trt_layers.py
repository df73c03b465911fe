"""Each layer of the TensorRT-style network API against the math TensorRT documents for it (torch/numpy oracles),
plus the network's own behaviour: shapes with -1, re-lowering on parameter changes, renames, and refusals."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tensorforge as trt
import tensorforge.plugin as tfp
from trt_helpers import LOGGER, rand, run_network
from tensorforge.util.errors import PluginError, UsageError

A = trt.ActivationType


def one_layer(shape, make, dtype=trt.float32, name="x"):
    network = trt.Builder(LOGGER).create_network(0)
    x = network.add_input(name, dtype, shape)
    layer = make(network, x)
    layer.get_output(0).name = "y"
    network.mark_output(layer.get_output(0))
    return network, layer


@pytest.mark.parametrize("kind,alpha,beta,ref", [
    (A.RELU, 0, 0, torch.relu), (A.SIGMOID, 0, 0, torch.sigmoid), (A.TANH, 0, 0, torch.tanh),
    (A.LEAKY_RELU, 0.1, 0, lambda x: F.leaky_relu(x, 0.1)), (A.ELU, 0.7, 0, lambda x: F.elu(x, 0.7)),
    (A.SELU, 1.5, 1.2, lambda x: 1.2 * torch.where(x > 0, x, 1.5 * (torch.exp(x) - 1))),
    (A.SOFTSIGN, 0, 0, F.softsign), (A.SOFTPLUS, 2.0, 0.5, lambda x: 2.0 * torch.log1p(torch.exp(0.5 * x))),
    (A.CLIP, -0.5, 0.25, lambda x: x.clamp(-0.5, 0.25)),
    (A.HARD_SIGMOID, 0.3, 0.4, lambda x: (0.3 * x + 0.4).clamp(0, 1)),
    (A.SCALED_TANH, 1.7, 0.6, lambda x: 1.7 * torch.tanh(0.6 * x)),
    (A.THRESHOLDED_RELU, 0.2, 0, lambda x: torch.where(x > 0.2, x, 0.0)),
    (A.GELU_ERF, 0, 0, F.gelu), (A.GELU_TANH, 0, 0, lambda x: F.gelu(x, approximate="tanh"))])
def test_activation(kind, alpha, beta, ref):
    def make(network, x):
        layer = network.add_activation(x, kind)
        layer.alpha, layer.beta = alpha, beta
        return layer
    network, layer = one_layer((2, 5), make)
    assert layer.type == kind
    xs = rand(2, 5, seed=int(kind)) * 2
    np.testing.assert_allclose(run_network(network, {"x": xs})["y"], ref(torch.from_numpy(xs)).numpy(),
                               rtol=1e-5, atol=1e-6)


E = trt.ElementWiseOperation


@pytest.mark.parametrize("op,ref", [(E.SUM, np.add), (E.PROD, np.multiply), (E.MAX, np.maximum), (E.MIN, np.minimum),
                                    (E.SUB, np.subtract), (E.DIV, np.divide), (E.POW, None), (E.FLOOR_DIV, np.floor_divide),
                                    (E.EQUAL, np.equal), (E.GREATER, np.greater), (E.LESS, np.less)])
def test_elementwise_float_with_broadcast(op, ref):
    b = np.array([[1.5], [-2.0]], np.float32)

    def make(network, x):
        return network.add_elementwise(x, network.add_constant(b.shape, b).get_output(0), op)
    network, _ = one_layer((2, 4), make)
    xs = rand(2, 4, seed=3) * 3
    if op is E.POW:
        xs, ref = np.abs(xs), np.power
    got = run_network(network, {"x": xs})["y"]
    np.testing.assert_allclose(got, ref(xs, b), rtol=1e-5, atol=1e-6)


def test_elementwise_integer_floor_div_and_logic():
    b = np.array([3, -3, 4, -4], np.int32)
    network, _ = one_layer((4,), lambda n, x: n.add_elementwise(x, n.add_constant((4,), b).get_output(0), E.FLOOR_DIV),
                           dtype=trt.int32)
    xs = np.array([-7, 7, -9, 10], np.int32)
    np.testing.assert_array_equal(run_network(network, {"x": xs})["y"], np.floor_divide(xs, b))
    m = np.array([True, False, True, False])
    network, _ = one_layer((4,), lambda n, x: n.add_elementwise(x, n.add_constant((4,), m).get_output(0), E.XOR),
                           dtype=trt.bool_)
    xs = np.array([True, True, False, False])
    np.testing.assert_array_equal(run_network(network, {"x": xs})["y"], xs ^ m)


M = trt.MatrixOperation


@pytest.mark.parametrize("op0,op1,a_shape,b_shape,expr", [
    (M.NONE, M.NONE, (2, 3, 4), (4, 5), "bij,jk->bik"), (M.TRANSPOSE, M.NONE, (2, 4, 3), (4, 5), "bji,jk->bik"),
    (M.NONE, M.TRANSPOSE, (2, 3, 4), (5, 4), "bij,kj->bik"), (M.VECTOR, M.NONE, (2, 4), (2, 4, 5), "bj,bjk->bk"),
    (M.NONE, M.VECTOR, (2, 3, 4), (2, 4), "bij,bj->bi"), (M.VECTOR, M.VECTOR, (2, 4), (2, 4), "bj,bj->b")])
def test_matrix_multiply(op0, op1, a_shape, b_shape, expr):
    bs = rand(*b_shape, seed=2)
    network, layer = one_layer(a_shape, lambda n, x: n.add_matrix_multiply(x, op0, n.add_constant(b_shape, bs).get_output(0), op1))
    xs = rand(*a_shape, seed=1)
    want = np.einsum(expr, xs, bs)
    assert tuple(layer.get_output(0).shape) == want.shape
    np.testing.assert_allclose(run_network(network, {"x": xs})["y"], want, rtol=1e-5, atol=1e-5)


P = trt.PoolingType


@pytest.mark.parametrize("kind,mode,excl", [(P.MAX, trt.PaddingMode.EXPLICIT_ROUND_DOWN, True),
                                            (P.AVERAGE, trt.PaddingMode.EXPLICIT_ROUND_DOWN, True),
                                            (P.AVERAGE, trt.PaddingMode.EXPLICIT_ROUND_DOWN, False),
                                            (P.MAX, trt.PaddingMode.EXPLICIT_ROUND_UP, True),
                                            (P.MAX_AVERAGE_BLEND, trt.PaddingMode.EXPLICIT_ROUND_DOWN, True)])
def test_pooling(kind, mode, excl):
    def make(network, x):
        layer = network.add_pooling_nd(x, kind, (3, 3))
        layer.stride_nd, layer.padding_nd, layer.padding_mode = (2, 2), (1, 1), mode
        layer.average_count_excludes_padding, layer.blend_factor = excl, 0.25
        return layer
    network, _ = one_layer((1, 2, 8, 8), make)
    xs = rand(1, 2, 8, 8, seed=4)
    t = torch.from_numpy(xs)
    ceil = mode is trt.PaddingMode.EXPLICIT_ROUND_UP
    mx = F.max_pool2d(t, 3, 2, 1, ceil_mode=ceil)
    av = F.avg_pool2d(t, 3, 2, 1, ceil_mode=ceil, count_include_pad=not excl)
    want = {P.MAX: mx, P.AVERAGE: av, P.MAX_AVERAGE_BLEND: 0.25 * mx + 0.75 * av}[kind]
    np.testing.assert_allclose(run_network(network, {"x": xs})["y"], want.numpy(), rtol=1e-5, atol=1e-6)


def test_shuffle_transpose_reshape_transpose_with_dynamic_batch():
    def make(network, x):
        layer = network.add_shuffle(x)
        layer.first_transpose = trt.Permutation((0, 2, 3, 1))
        layer.reshape_dims = (0, -1, 3)
        layer.second_transpose = (0, 2, 1)
        return layer
    network, layer = one_layer((-1, 3, 2, 4), make)
    assert tuple(layer.get_output(0).shape) == (-1, 3, 8)
    xs = rand(5, 3, 2, 4, seed=5)
    want = xs.transpose(0, 2, 3, 1).reshape(5, -1, 3).transpose(0, 2, 1)
    got = run_network(network, {"x": xs}, {"x": ((1, 3, 2, 4), (2, 3, 2, 4), (8, 3, 2, 4))})["y"]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op,ref", [(trt.ReduceOperation.SUM, np.sum), (trt.ReduceOperation.PROD, np.prod),
                                    (trt.ReduceOperation.MAX, np.max), (trt.ReduceOperation.MIN, np.min),
                                    (trt.ReduceOperation.AVG, np.mean)])
@pytest.mark.parametrize("keep", [True, False])
def test_reduce(op, ref, keep):
    network, _ = one_layer((2, 3, 4), lambda n, x: n.add_reduce(x, op, 0b101, keep))
    xs = rand(2, 3, 4, seed=6)
    np.testing.assert_allclose(run_network(network, {"x": xs})["y"], ref(xs, axis=(0, 2), keepdims=keep), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape,axis", [((2, 3, 4, 5), 1), ((4, 6), 0), ((2, 3, 4), 0)])
def test_softmax_and_concatenation_default_axes(shape, axis):
    """TensorRT's defaults: axis rank − 3, or 0 when the rank is below 3."""
    xs = rand(*shape, seed=7)
    network, _ = one_layer(shape, lambda n, x: n.add_softmax(x))
    np.testing.assert_allclose(run_network(network, {"x": xs})["y"], torch.softmax(torch.from_numpy(xs), axis).numpy(),
                               rtol=1e-5, atol=1e-6)
    network, layer = one_layer(shape, lambda n, x: n.add_concatenation([x, x]))
    assert layer.get_output(0).shape[axis] == 2 * shape[axis]
    np.testing.assert_array_equal(run_network(network, {"x": xs})["y"], np.concatenate([xs, xs], axis))


def test_changing_a_parameter_relowers_the_layer_and_its_consumers_shapes():
    w = rand(4, 2, 3, 3, seed=8)
    network = trt.Builder(LOGGER).create_network(0)
    x = network.add_input("x", trt.float32, (1, 2, 9, 9))
    conv = network.add_convolution_nd(x, 4, (3, 3), w)
    relu = network.add_activation(conv.get_output(0), A.RELU)
    assert tuple(relu.get_output(0).shape) == (1, 4, 7, 7)
    conv.stride_nd = (2, 2)
    conv.padding_nd = (1, 1)
    assert tuple(relu.get_output(0).shape) == (1, 4, 5, 5)
    conv.name = "stem"
    relu.get_output(0).name = "out"
    network.mark_output(relu.get_output(0))
    assert [network.get_layer(i).name for i in range(network.num_layers)] == ["stem", "Activation_1"]
    xs = rand(1, 2, 9, 9, seed=9)
    want = F.relu(F.conv2d(torch.from_numpy(xs), torch.from_numpy(w), stride=2, padding=1)).numpy()
    np.testing.assert_allclose(run_network(network, {"x": xs})["out"], want, rtol=1e-5, atol=1e-5)
    ir = network.to_ir()
    assert [(layer.name, layer.op, layer.origin) for layer in ir.layers] == [("stem", "Conv", ["stem"]),
                                                                             ("Activation_1", "Relu", ["Activation_1"])]


def test_grouped_convolution_takes_channels_from_the_weight_count():
    w, b = rand(6, 2, 3, 3, seed=10), rand(6, seed=11)
    def make(network, x):
        layer = network.add_convolution_nd(x, 6, (3, 3), w.reshape(-1), b)
        layer.num_groups = 2
        layer.dilation_nd = (2, 2)
        layer.padding_mode = trt.PaddingMode.SAME_UPPER
        return layer
    network, _ = one_layer((1, 4, 7, 7), make)
    xs = rand(1, 4, 7, 7, seed=12)
    want = F.conv2d(torch.from_numpy(xs), torch.from_numpy(w), torch.from_numpy(b), padding="same", dilation=2, groups=2)
    np.testing.assert_allclose(run_network(network, {"x": xs})["y"], want.numpy(), rtol=1e-5, atol=1e-5)


def test_plugin_layer():
    with tfp.scope():
        @tfp.register("test_api::Scale")
        def _(x: tfp.TensorDesc, factor: float = 1.0) -> tfp.TensorDesc:
            return x.like()

        @tfp.reference("test_api::Scale")
        def _(x, factor):
            return x * factor

        network, layer = one_layer((2, 3), lambda n, x: n.add_plugin([x], "test_api::Scale", {"factor": 3}))
        assert layer.type == trt.LayerType.PLUGIN and network.to_ir().layers[0].attrs == {"factor": 3.0}
        xs = rand(2, 3, seed=13)
        np.testing.assert_allclose(run_network(network, {"x": xs})["y"], xs * 3, rtol=1e-6)
        with pytest.raises(PluginError, match="has no attribute 'scale'"):
            one_layer((2, 3), lambda n, x: n.add_plugin([x], "test_api::Scale", {"scale": 3}))
    with pytest.raises(PluginError, match="not registered"):
        one_layer((2, 3), lambda n, x: n.add_plugin([x], "test_api::Scale"))


def test_refusals_are_one_line_and_leave_the_network_intact():
    network = trt.Builder(LOGGER).create_network(0)
    x = network.add_input("x", trt.float32, (1, 4, 5, 5))
    with pytest.raises(UsageError, match="do not split into 3 maps"):
        network.add_convolution_nd(x, 3, (3, 3), np.ones(20, np.float32))
    assert network.num_layers == 0 and not network._net.layers and not network._net.constants
    conv = network.add_convolution_nd(x, 2, (3, 3), np.ones(72, np.float32))
    with pytest.raises(UsageError, match="EXPLICIT_ROUND_UP is not supported for convolutions"):
        conv.padding_mode = trt.PaddingMode.EXPLICIT_ROUND_UP
    assert tuple(conv.get_output(0).shape) == (1, 2, 3, 3)
    soft = network.add_softmax(conv.get_output(0))
    with pytest.raises(UsageError, match="exactly one bit"):
        soft.axes = 0b110
    with pytest.raises(UsageError, match="network input or a constant"):
        network.mark_output(x)
    other = trt.Builder(LOGGER).create_network(0).add_input("z", trt.float32, (1,))
    with pytest.raises(UsageError, match="is not a tensor of network"):
        network.add_activation(other, A.RELU)
    with pytest.raises(UsageError, match="already used"):
        network.add_input("x", trt.float32, (1,))
    bad = network.add_elementwise(x, network.add_constant((3,), np.ones(3, np.float32)).get_output(0), E.SUM)
    with pytest.raises(UsageError, match=f"layer '{bad.name}' \\(Add\\) cannot be computed"):
        bad.get_output(0).shape
    bad.precision = trt.DataType.HALF                 # a per-layer constraint now (tests/api/test_trt_calibrator.py)
    assert bad.precision == trt.DataType.HALF and bad.precision_is_set()
    with pytest.raises(UsageError, match="not a compute precision"):
        bad.precision = trt.DataType.INT32
    with pytest.raises(UsageError, match="has no outputs"):
        trt.Builder(LOGGER).create_network(0).to_ir()


def test_init_libnvinfer_plugins_registers_the_library():
    with tfp.scope():
        assert trt.init_libnvinfer_plugins(LOGGER, "")
        assert tfp.find("custom::MyGelu") is not None
        network, _ = one_layer((2, 5), lambda n, x: n.add_plugin([x], "custom::MyGelu"))
        xs = rand(2, 5, seed=14)
        np.testing.assert_allclose(run_network(network, {"x": xs})["y"], F.gelu(torch.from_numpy(xs)).numpy(),
                                   rtol=1e-5, atol=1e-6)
