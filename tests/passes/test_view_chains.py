"""Layout-op chains ⇒ the Reshape/Transpose they amount to (passes/view_chains.py).

Positive: the dynamo export's K fold/unfold (four ops, identity overall) disappears; ViT's head split becomes one
Reshape + one Transpose; identity chains under a dynamic profile go at every shape. Negative: a transpose followed
by a merging reshape (not of the reshape-then-permute form), and a reshape whose shape differs per profile point.
Each build is compared with onnxruntime and the unfused build (check_fused).
"""

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from fusion_helpers import check_fused, ops

F = TensorProto.FLOAT
LAYOUT = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten"}


def _model(nodes, x_shape, inits) -> bytes:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, x_shape)],
                              [helper.make_tensor_value_info("y", F, None)],
                              [numpy_helper.from_array(np.asarray(v, np.int64), n) for n, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_fold_and_unfold_of_k_is_the_identity():
    nodes = [helper.make_node("Reshape", ["x", "s1"], ["a"]), helper.make_node("Transpose", ["a"], ["b"], perm=[0, 2, 1]),
             helper.make_node("Reshape", ["b", "s2"], ["c"]), helper.make_node("Transpose", ["c"], ["d"], perm=[0, 1, 3, 2]),
             helper.make_node("Relu", ["d"], ["y"])]
    data = _model(nodes, [2, 3, 5, 4], [("s1", [6, 5, 4]), ("s2", [2, 3, 4, 5])])
    engine, text = check_fused(data, {"x": _x((2, 3, 5, 4))}, rtol=0, atol=0)
    assert ops(engine) == ["Relu"] and "⇒ nothing" in text


def test_head_split_becomes_one_reshape_and_one_transpose():
    """(S, B, H·D) → Reshape(S, B·H, D) → Transpose → Reshape(B, H, S, D): the first Reshape copies a strided input;
    Reshape(S, B, H, D) → Transpose(1, 2, 0, 3) is the same tensor as views."""
    nodes = [helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0, 2]),
             helper.make_node("Reshape", ["t", "s1"], ["a"]), helper.make_node("Transpose", ["a"], ["b"], perm=[1, 0, 2]),
             helper.make_node("Reshape", ["b", "s2"], ["c"]), helper.make_node("Neg", ["c"], ["y"])]
    data = _model(nodes, [2, 7, 12], [("s1", [7, 6, 4]), ("s2", [2, 3, 7, 4])])   # B=2, S=7, H=3, D=4
    engine, _ = check_fused(data, {"x": _x((2, 7, 12))}, rtol=0, atol=0)
    layout = [op for op in ops(engine) if op in LAYOUT]
    assert layout == ["Reshape", "Transpose"]


def test_permute_then_merge_stays():
    nodes = [helper.make_node("Transpose", ["x"], ["a"], perm=[0, 2, 1]), helper.make_node("Reshape", ["a", "s"], ["y"])]
    data = _model(nodes, [2, 3, 4], [("s", [2, 12])])
    engine, _ = check_fused(data, {"x": _x((2, 3, 4))}, rtol=0, atol=0)
    assert ops(engine) == ["Transpose", "Reshape"]


def _dynamic(nodes, inits):
    data = _model(nodes, ["batch", 4, 6], inits)
    shapes = {"x": ((1, 4, 6), (3, 4, 6), (5, 4, 6))}
    engine = tfg.build(data, shapes=shapes, device="cpu")
    for b in (1, 5):
        x = _x((b, 4, 6), b)
        got = engine.run({"x": x})["y"]
        plain = tfg.build(data, shapes=shapes, device="cpu", optimization_level=0).run({"x": x})["y"]
        np.testing.assert_array_equal(np.asarray(got), np.asarray(plain))
    return engine


def test_identity_chain_under_a_dynamic_profile():
    nodes = [helper.make_node("Reshape", ["x", "flat"], ["a"]), helper.make_node("Reshape", ["a", "back"], ["b"]),
             helper.make_node("Sigmoid", ["b"], ["y"])]
    engine = _dynamic(nodes, [("flat", [0, -1]), ("back", [0, 4, 6])])
    assert ops(engine) == ["Sigmoid"]


def test_reshape_that_depends_on_the_batch_stays_under_a_dynamic_profile():
    nodes = [helper.make_node("Reshape", ["x", "flat"], ["a"]), helper.make_node("Unsqueeze", ["a", "ax"], ["b"]),
             helper.make_node("Sigmoid", ["b"], ["y"])]
    engine = _dynamic(nodes, [("flat", [0, -1]), ("ax", [1])])
    assert [op for op in ops(engine) if op in LAYOUT] == ["Reshape", "Unsqueeze"]
