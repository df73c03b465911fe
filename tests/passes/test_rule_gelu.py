"""GELU rules: the exporters' erf and tanh forms become Gelu; the seed's gelu(gelu(x)) becomes ONE layer."""

import math

import numpy as np
import onnx
import pytest
import torch
import torch.nn as nn
from onnx import TensorProto, helper

from fusion_helpers import build_logged, check_fused, export_quiet, feeds_for, ops


class GeluTwice(nn.Module):
    def __init__(self, approximate="none"):
        super().__init__()
        self.gelu = nn.GELU(approximate=approximate)

    def forward(self, x):
        return self.gelu(self.gelu(x))


class GeluMulForm(nn.Module):
    """The BERT-era hand-written form with x·(1/√2) instead of x/√2."""

    def forward(self, x):
        return x * 0.5 * (1.0 + torch.erf(x * 0.7071067811865476))


def _steps(engine):
    return [[s["op"] for s in layer.attrs["steps"]] for layer in engine.data.layers if layer.op == "PointwiseChain"]


@pytest.mark.parametrize("dynamo,opset", [(False, 11), (True, 18)])
def test_seed_gelu_twice_becomes_one_kernel(dynamo, opset):
    x = torch.randn(3, 257)
    model = export_quiet(GeluTwice(), (x,), opset=opset, dynamo=dynamo)
    assert [n.op_type for n in onnx.load_from_string(model).graph.node if n.op_type != "Constant"] == \
        ["Div", "Erf", "Add", "Mul", "Mul"] * 2
    engine, _ = check_fused(model, feeds_for(model, x.numpy()))
    assert ops(engine) == ["PointwiseChain"]
    assert _steps(engine) == [["Gelu", "Gelu"]]
    assert engine.data.build_info["passes"]["fuse-gelu"] == 2
    assert len(engine.data.layers[0].attrs["kernel"]) == 64   # the hash of its generated source (regenerated at load)


def test_mul_by_inverse_sqrt2_form():
    x = torch.randn(4, 33)
    model = export_quiet(GeluMulForm(), (x,), opset=17)
    engine, _ = check_fused(model, feeds_for(model, x.numpy()))
    assert ops(engine) == ["Gelu"] and engine.data.layers[0].attrs["approximate"] == "none"


@pytest.mark.parametrize("dynamo,opset", [(False, 11), (True, 18)])
def test_tanh_form(dynamo, opset):
    x = torch.randn(4, 33) * 3
    model = export_quiet(nn.GELU(approximate="tanh"), (x,), opset=opset, dynamo=dynamo)
    assert "Tanh" in [n.op_type for n in onnx.load_from_string(model).graph.node]
    engine, _ = check_fused(model, feeds_for(model, x.numpy()))
    assert ops(engine) == ["Gelu"] and engine.data.layers[0].attrs["approximate"] == "tanh"


def _erf_gelu_model(sqrt2: float, dtype=TensorProto.FLOAT, extra_erf_reader=False, half_shape=()):
    """Div(x, c) → Erf → Add(1) → Mul(x) → Mul(0.5) built by hand (c and dtype chosen by the test)."""
    np_dtype = helper.tensor_dtype_to_np_dtype(dtype)

    def const(name, value, shape=()):
        return helper.make_tensor(name, dtype, shape, np.full(shape, value, np_dtype).reshape(-1).tolist())
    nodes = [helper.make_node("Div", ["x", "c_sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "c_one"], ["a"]), helper.make_node("Mul", ["x", "a"], ["m"]),
             helper.make_node("Mul", ["m", "c_half"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", dtype, None)]
    if extra_erf_reader:
        nodes.append(helper.make_node("Neg", ["e"], ["z"]))
        outputs.append(helper.make_tensor_value_info("z", dtype, None))
    graph = helper.make_graph(nodes, "gelu", [helper.make_tensor_value_info("x", dtype, [2, 5])], outputs,
                              [const("c_sqrt2", sqrt2), const("c_one", 1.0), const("c_half", 0.5, half_shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_float16_constants_match_within_their_precision():
    x = (np.random.randn(2, 5)).astype(np.float16)
    model = _erf_gelu_model(math.sqrt(2), TensorProto.FLOAT16)
    engine, _ = check_fused(model, {"x": x}, rtol=2e-3, atol=2e-3)
    assert ops(engine) == ["Gelu"]


def test_wrong_constant_is_rejected_with_its_reason():
    model = _erf_gelu_model(1.5)
    engine, log = check_fused(model, {"x": np.random.randn(2, 5).astype(np.float32)})
    assert "Gelu" not in ops(engine)
    assert "x·½·(1+erf(x/√2)) ⇒ Gelu(x): not applied" in log and "expected constant ≈1.41421" in log
    assert "found 1.5" in log


def test_shared_intermediate_is_rejected_with_its_reason():
    model = _erf_gelu_model(math.sqrt(2), extra_erf_reader=True)
    engine, log = check_fused(model, {"x": np.random.randn(2, 5).astype(np.float32)})
    assert "Gelu" not in ops(engine)
    assert "intermediate 'e' is also read by layer" in log


def test_broadcasting_constant_is_rejected_with_its_reason():
    model = _erf_gelu_model(math.sqrt(2), half_shape=(1, 1, 1))   # the ½ makes the result rank 3
    engine, log = check_fused(model, {"x": np.random.randn(2, 5).astype(np.float32)})
    assert "Gelu" not in ops(engine)
    assert "the constants change the shape ((2, 5) → (1, 2, 5))" in log


def test_level_0_keeps_the_decomposed_graph():
    model = _erf_gelu_model(math.sqrt(2))
    engine, _ = build_logged(model, optimization_level=0)
    assert ops(engine) == ["Div", "Erf", "Add", "Mul", "Mul"]
