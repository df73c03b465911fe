"""Non-finite floats in an engine's data (a −∞ literal in a pointwise chain, −∞ masks and Clip bounds in the weights)
round-trip exactly through the file, and the consistency check does not judge dtypes fed by tensors whose dtype is
not declared (it compared a float32 stand-in with an Identity declared float16: 4 expanded-attention backend cases)."""

import struct

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from tensorforge.api.high_level import Engine
from tensorforge.engine import from_bytes

from oracle import assert_close, ort_run


def masked_softmax_model():
    """y = softmax(x + mask) with mask[j] = −∞ for j ≥ 2, z = clip(x, −∞, 0.5), and w = relu(max(x, −∞)·2 + x) — a
    pointwise chain whose literal −∞ is stored in the manifest itself."""
    mask = np.array([0, 0, -np.inf, -np.inf], np.float32)
    nodes = [helper.make_node("Add", ["x", "mask"], ["s"]), helper.make_node("Softmax", ["s"], ["y"], axis=-1),
             helper.make_node("Clip", ["x", "lo", "hi"], ["z"]),
             helper.make_node("Max", ["x", "lo"], ["m"]), helper.make_node("Mul", ["m", "two"], ["m2"]),
             helper.make_node("Add", ["m2", "x"], ["m3"]), helper.make_node("Relu", ["m3"], ["w"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4]),
                           helper.make_tensor_value_info("z", TensorProto.FLOAT, [3, 4]),
                           helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 4])],
                          initializer=[numpy_helper.from_array(mask, "mask"),
                                       numpy_helper.from_array(np.array(-np.inf, np.float32), "lo"),
                                       numpy_helper.from_array(np.array(0.5, np.float32), "hi"),
                                       numpy_helper.from_array(np.array(2.0, np.float32), "two")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def test_engine_with_infinite_literals_round_trips():
    model = masked_softmax_model()
    feeds = {"x": np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)}
    data = tfg.build(model, device="cpu").serialize()
    mlen = struct.unpack_from("<8sIQQ32s", data)[2]
    assert "-Infinity" in data[60:60 + mlen].decode()     # the chain's literal went through the manifest
    got = Engine(from_bytes(data), "cpu").run(dict(feeds))
    assert_close(got, ort_run(model, feeds), rtol=1e-6, atol=1e-7)
