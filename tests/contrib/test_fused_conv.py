"""com.microsoft FusedConv against onnxruntime (rtol 1e-3, atol 1e-4): the nodes onnxruntime's own graph optimizer
writes (a session saving its optimized model), hand-built nodes for every activation and the residual Z, and
refusals with a reason."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from oracle import check_against_ort
from tensorforge.util.errors import UnsupportedOpError

F = TensorProto.FLOAT
RNG = np.random.default_rng(3)


def _w(*shape):
    return (RNG.normal(size=shape) * 0.3).astype(np.float32)


def _model(nodes, inits, x_shape=(2, 3, 8, 8), extra_inputs=()):
    ins = [helper.make_tensor_value_info("x", F, list(x_shape))] + \
          [helper.make_tensor_value_info(n, F, list(s)) for n, s in extra_inputs]
    g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info("y", F, None)],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 9
    return m


def test_fused_conv_written_by_onnxruntime_optimizer(tmp_path):
    """Conv+Relu and Conv+LeakyRelu become FusedConv in the model an onnxruntime session saves."""
    inits = {"w1": _w(4, 3, 3, 3), "b1": _w(4), "w2": _w(4, 4, 3, 3)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("LeakyRelu", ["c2"], ["y"], alpha=0.2)]
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    opts.optimized_model_filepath = str(tmp_path / "opt.onnx")
    ort.InferenceSession(_model(nodes, inits).SerializeToString(), opts, providers=["CPUExecutionProvider"])
    opt = onnx.load(tmp_path / "opt.onnx")
    assert [n.op_type for n in opt.graph.node] == ["FusedConv", "FusedConv"], [n.op_type for n in opt.graph.node]
    check_against_ort(opt, {"x": RNG.normal(size=(2, 3, 8, 8)).astype(np.float32)})


@pytest.mark.parametrize("activation,params", [("", []), ("Relu", []), ("Tanh", []), ("Sigmoid", []),
                                               ("LeakyRelu", [0.3]), ("Clip", [-0.5, 0.7]),
                                               ("HardSigmoid", [0.3, 0.4])])
@pytest.mark.parametrize("with_z", [False, True])
def test_fused_conv_activations(activation, params, with_z):
    attrs = {"pads": [1, 1, 1, 1], "group": 1}
    if activation:
        attrs["activation"] = activation
    if params:
        attrs["activation_params"] = params
    ins = ["x", "w", "b"] + (["z"] if with_z else [])
    node = helper.make_node("FusedConv", ins, ["y"], domain="com.microsoft", **attrs)
    extra = [("z", (2, 4, 8, 8))] if with_z else []
    feeds = {"x": RNG.normal(size=(2, 3, 8, 8)).astype(np.float32)}
    if with_z:
        feeds["z"] = RNG.normal(size=(2, 4, 8, 8)).astype(np.float32)
    check_against_ort(_model([node], {"w": _w(4, 3, 3, 3), "b": _w(4)}, extra_inputs=extra), feeds)


def test_fused_conv_grouped_dilated():
    node = helper.make_node("FusedConv", ["x", "w"], ["y"], domain="com.microsoft", activation="Relu", group=2,
                            dilations=[2, 2], pads=[2, 2, 2, 2])
    check_against_ort(_model([node], {"w": _w(6, 2, 3, 3)}, x_shape=(1, 4, 9, 9)),
                      {"x": RNG.normal(size=(1, 4, 9, 9)).astype(np.float32)})


@pytest.mark.parametrize("attrs,match", [({"activation": "Gelu"}, "activation 'Gelu'"),
                                         ({"activation": "Clip", "activation_params": [0.0]}, "takes 2")])
def test_fused_conv_refusals(attrs, match):
    node = helper.make_node("FusedConv", ["x", "w"], ["y"], domain="com.microsoft", **attrs)
    with pytest.raises(UnsupportedOpError, match=match):
        tfg.build(_model([node], {"w": _w(4, 3, 3, 3)}).SerializeToString(), device="cpu")
