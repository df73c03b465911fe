"""Common-subexpression removal, and grouping of elementwise chains into PointwiseChain layers."""

import numpy as np
import torch
import torch.nn as nn
from onnx import TensorProto, helper

from fusion_helpers import build_logged, check_fused, export_quiet, feeds_for, ops
from tensorforge.ir import Network
from tensorforge.passes.cse import eliminate_common_subexpressions


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, None) for n, t in outputs], list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()


def test_cse_merges_equal_constants_and_repeated_layers():
    net = Network("cse")
    net.add_input("x", torch.float32, (2, 3))
    net.add_constant("one_a", torch.tensor(1.0))
    net.add_constant("one_b", torch.tensor(1.0))
    net.add_constant("two", torch.tensor(2.0))
    net.add_layer("Add", ["x", "one_a"], ["a1"], name="a1")
    net.add_layer("Add", ["x", "one_b"], ["a2"], name="a2")          # same as a1 once the constants merge
    net.add_layer("Add", ["x", "two"], ["a3"], name="a3")            # a different constant: kept
    net.add_layer("RandomNormalLike", ["x"], ["r1"], name="r1")
    net.add_layer("RandomNormalLike", ["x"], ["r2"], name="r2")      # two draws are not one
    net.add_layer("Sum", ["a1", "a2", "a3", "r1", "r2"], ["y"], name="y")
    net.mark_output("y")
    assert eliminate_common_subexpressions(net) == 2                 # one constant, one layer
    assert [layer.name for layer in net.layers] == ["a1", "a3", "r1", "r2", "y"]
    assert net.layers[-1].inputs == ["a1", "a1", "a3", "r1", "r2"]
    assert "one_b" not in net.constants


def test_cse_keeps_layers_that_produce_network_outputs():
    net = Network("cse")
    net.add_input("x", torch.float32, (2,))
    net.add_layer("Relu", ["x"], ["y1"], name="r1")
    net.add_layer("Relu", ["x"], ["y2"], name="r2")
    net.mark_output("y1")
    net.mark_output("y2")
    assert eliminate_common_subexpressions(net) == 0 and len(net.layers) == 2


def test_cse_end_to_end_repeated_subgraph():
    nodes = [helper.make_node("Exp", ["x"], ["e1"]), helper.make_node("Exp", ["x"], ["e2"]),
             helper.make_node("Sub", ["e1", "e2"], ["y"])]
    model = _model(nodes, [("x", TensorProto.FLOAT, [3, 4])], [("y", TensorProto.FLOAT)])
    engine, _ = check_fused(model, {"x": np.random.randn(3, 4).astype(np.float32)})
    chain = engine.data.layers[0]
    assert ops(engine) == ["PointwiseChain"] and [s["op"] for s in chain.attrs["steps"]] == ["Exp", "Sub"]
    assert engine.data.build_info["passes"]["cse"] == 1


class ScaleShiftRelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale, self.shift = nn.Parameter(torch.randn(3, 1, 1)), nn.Parameter(torch.randn(3, 1, 1))

    def forward(self, x):
        return torch.relu(x * self.scale + self.shift) * 0.5


def test_broadcast_chain_is_one_layer_with_literals():
    x = torch.randn(2, 3, 4, 5)
    model = export_quiet(ScaleShiftRelu(), (x,), opset=17)
    engine, _ = check_fused(model, feeds_for(model, x.numpy()))
    assert ops(engine) == ["PointwiseChain"]
    chain = engine.data.layers[0]
    assert [s["op"] for s in chain.attrs["steps"]] == ["Mul", "Add", "Relu", "Mul"]
    assert len(chain.inputs) == 3 and chain.attrs["consts"][0]["value"] == 0.5


def test_intermediate_read_elsewhere_becomes_a_second_output():
    class TwoUses(nn.Module):
        def forward(self, x, w):
            h = torch.sigmoid(x) * 2.0
            return torch.tanh(h) + 1.0, torch.matmul(h, w)
    x, w = torch.randn(4, 6), torch.randn(6, 3)
    model = export_quiet(TwoUses(), (x, w), opset=17)
    engine, _ = check_fused(model, feeds_for(model, x.numpy(), w.numpy()))
    chains = [layer for layer in engine.data.layers if layer.op == "PointwiseChain"]
    assert len(chains) == 1 and len(chains[0].outputs) == 2


def test_no_chain_through_a_path_that_leaves_and_returns():
    """relu(x) feeds a MatMul and a Mul that also reads the MatMul: one chain would wait on itself."""
    class Diamond(nn.Module):
        def forward(self, x, w):
            r = torch.relu(x)
            return torch.exp(r) * torch.matmul(r, w)
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    model = export_quiet(Diamond(), (x, w), opset=17)
    engine, _ = check_fused(model, feeds_for(model, x.numpy(), w.numpy()))
    assert "MatMul" in ops(engine)
    for layer in engine.data.layers:
        steps = {s["op"] for s in layer.attrs.get("steps", [])}
        assert not {"Relu", "Mul"} <= steps, "Relu and the Mul after the MatMul cannot share one kernel"
    produced = set(engine.data.input_names) | set(engine.data.constants)
    for layer in engine.data.layers:                 # execution order respects every dependency
        assert all(not i or i in produced for i in layer.inputs), layer.name
        produced.update(layer.outputs)


def test_integer_division_is_not_fused_and_says_why():
    nodes = [helper.make_node("Div", ["a", "b"], ["d"]), helper.make_node("Neg", ["d"], ["y"])]
    model = _model(nodes, [("a", TensorProto.INT64, [5]), ("b", TensorProto.INT64, [5])], [("y", TensorProto.INT64)])
    feeds = {"a": np.array([7, -7, 9, 1, 0]), "b": np.array([2, 2, -4, 3, 5])}
    engine, log = check_fused(model, feeds)
    assert ops(engine) == ["Div", "Neg"]
    assert "Div on torch.int64 is fused only for floating-point tensors" in log


def test_fp16_build_folds_the_boundary_casts_into_the_chain():
    x = torch.randn(3, 40)
    model = export_quiet(nn.Sequential(nn.GELU(), nn.GELU()), (x,), opset=11)
    engine, _ = build_logged(model, fp16=True)
    assert ops(engine) == ["PointwiseChain"]
    steps = [s["op"] for s in engine.data.layers[0].attrs["steps"]]
    assert steps == ["Cast", "Gelu", "Gelu", "Cast"]
    got = engine.run(feeds_for(model, x.numpy()))[engine.output_names[0]]
    want = nn.functional.gelu(nn.functional.gelu(x.half().float()).half().float()).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
