"""The passes inside If/Loop/Scan bodies (issue 18.2): folding and fusion run in the bodies (layer counts
before/after), an If whose condition folds at build time becomes its taken branch; every model is checked
against onnxruntime and the unfused build (level 0)."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from fusion_helpers import build_logged, check_fused, ops

F = TensorProto.FLOAT


def _const(name, value, dtype=np.float32):
    value = np.asarray(value, dtype)
    return helper.make_tensor(name, helper.np_dtype_to_tensor_dtype(value.dtype), value.shape,
                              value.reshape(-1).tolist())


def _model(graph):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _hardswish_nodes(x, y, p):
    """paddle2onnx's HardSwish, with its constants made by Constant nodes and a foldable 2·3 = 6."""
    return [helper.make_node("Constant", [], [f"{p}three"], value=_const(f"{p}three_v", 3.0)),
            helper.make_node("Constant", [], [f"{p}two"], value=_const(f"{p}two_v", 2.0)),
            helper.make_node("Constant", [], [f"{p}zero"], value=_const(f"{p}zero_v", 0.0)),
            helper.make_node("Mul", [f"{p}two", f"{p}three"], [f"{p}six"]),            # folds to 6
            helper.make_node("Add", [x, f"{p}three"], [f"{p}a"]),
            helper.make_node("Clip", [f"{p}a", f"{p}zero", f"{p}six"], [f"{p}c"]),
            helper.make_node("Div", [f"{p}c", f"{p}six"], [f"{p}d"]),
            helper.make_node("Mul", [x, f"{p}d"], [y])]


def _loop_model(trips=3):
    """y = Loop(trips) { v ← hardswish(v·W + b) } with W, b captured from the outer graph."""
    body = helper.make_graph(
        [helper.make_node("MatMul", ["v_in", "W"], ["mm"]), helper.make_node("Add", ["mm", "b"], ["z"])]
        + _hardswish_nodes("z", "v_out", "h_") + [helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("v_in", F, [2, 8])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", F, [2, 8])])
    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "x"], ["y"], body=body)], "loop",
        [helper.make_tensor_value_info("x", F, [2, 8])], [helper.make_tensor_value_info("y", F, [2, 8])],
        [_const("M", trips, np.int64), _const("W", rng.standard_normal((8, 8)) * 0.4),
         _const("b", rng.standard_normal(8) * 0.1)])
    return _model(graph)


def test_loop_body_is_folded_and_fused():
    x = {"x": np.random.randn(2, 8).astype(np.float32) * 2}
    engine, log = check_fused(_loop_model(), x)
    loop = next(layer for layer in engine.data.layers if layer.op == "Loop")
    body_ops = [layer.op for layer in loop.attrs["body"].layers]
    assert body_ops == ["MatMulEpilogue", "Identity"] or body_ops == ["MatMulEpilogue"], body_ops
    assert loop.attrs["body"].layers[0].attrs["activation"] == "HardSwish"
    passes = engine.data.build_info["passes"]
    assert passes["bodies"] == 1 and passes["body-layers-before"] == 8
    assert passes["body-layers-after"] == len(body_ops)
    plain, _ = build_logged(_loop_model(), optimization_level=0)
    assert len(next(x for x in plain.data.layers if x.op == "Loop").attrs["body"].layers) == 8


def _if_model(cond_from_shape: bool):
    """If(cond) { then: hardswish(x) · 2 } else { -x }, cond = (dim 0 of x == 2) when cond_from_shape (it
    folds at build time: x has a static shape), else a graph input."""
    then_g = helper.make_graph(_hardswish_nodes("xc", "t_hs", "t_") + [
        helper.make_node("Constant", [], ["t_k"], value=_const("t_kv", 2.0)),
        helper.make_node("Mul", ["t_hs", "t_k"], ["t_out"])], "then",
        [helper.make_tensor_value_info("xc", F, [2, 5])], [helper.make_tensor_value_info("t_out", F, [2, 5])])
    else_g = helper.make_graph([helper.make_node("Neg", ["xc2"], ["e_out"])], "else",
                               [helper.make_tensor_value_info("xc2", F, [2, 5])],
                               [helper.make_tensor_value_info("e_out", F, [2, 5])])
    # ONNX If bodies read outer tensors by name; the parser turns them into captured inputs
    then_g.ClearField("input")
    else_g.ClearField("input")
    nodes = [helper.make_node("Identity", ["x"], ["xc"]), helper.make_node("Identity", ["x"], ["xc2"])]
    inputs = [helper.make_tensor_value_info("x", F, [2, 5])]
    if cond_from_shape:
        nodes += [helper.make_node("Shape", ["x"], ["s"]),
                  helper.make_node("Gather", ["s", "zero_i"], ["s0"], axis=0),
                  helper.make_node("Equal", ["s0", "two_i"], ["cond"])]
        inits = [_const("zero_i", 0, np.int64), _const("two_i", 2, np.int64)]
    else:
        inputs.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
        inits = []
    nodes.append(helper.make_node("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g))
    return _model(helper.make_graph(nodes, "if", inputs, [helper.make_tensor_value_info("y", F, [2, 5])], inits))


def test_if_with_a_constant_condition_becomes_its_branch():
    x = {"x": (np.random.randn(2, 5) * 4).astype(np.float32)}
    engine, _ = check_fused(_if_model(True), x)
    assert "If" not in ops(engine)
    assert engine.data.build_info["passes"]["constant-if"] == 1
    assert ops(engine) in (["HardSwish", "Mul"], ["PointwiseChain"]), ops(engine)


@pytest.mark.parametrize("cond", [True, False])
def test_if_branches_are_optimised_in_place(cond):
    x = {"x": (np.random.randn(2, 5) * 4).astype(np.float32), "cond": np.array(cond)}
    engine, _ = check_fused(_if_model(False), x)
    layer = next(x for x in engine.data.layers if x.op == "If")
    assert [x.op for x in layer.attrs["then_branch"].layers] == ["HardSwish", "Mul"]
    assert engine.data.build_info["passes"]["bodies"] == 2


def _scan_model():
    """A running sum over axis 0 of x (5, 3): s ← s + hardswish(x_t); y_t = s."""
    body = helper.make_graph(_hardswish_nodes("x_t", "h", "b_") + [
        helper.make_node("Add", ["s_in", "h"], ["s_out"]), helper.make_node("Identity", ["s_out"], ["y_t"])],
        "body", [helper.make_tensor_value_info("s_in", F, [3]), helper.make_tensor_value_info("x_t", F, [3])],
        [helper.make_tensor_value_info("s_out", F, [3]), helper.make_tensor_value_info("y_t", F, [3])])
    graph = helper.make_graph([helper.make_node("Scan", ["s0", "x"], ["s", "ys"], body=body, num_scan_inputs=1)],
                              "scan", [helper.make_tensor_value_info("s0", F, [3]),
                                       helper.make_tensor_value_info("x", F, [5, 3])],
                              [helper.make_tensor_value_info("s", F, [3]), helper.make_tensor_value_info("ys", F, [5, 3])])
    return _model(graph)


def test_scan_body_is_fused():
    feeds = {"s0": np.zeros(3, np.float32), "x": (np.random.randn(5, 3) * 4).astype(np.float32)}
    engine, _ = check_fused(_scan_model(), feeds)
    scan = next(x for x in engine.data.layers if x.op == "Scan")
    assert "HardSwish" in [x.op for x in scan.attrs["body"].layers]
    assert "Clip" not in [x.op for x in scan.attrs["body"].layers]


def test_state_whose_shape_changes_gets_no_shape_points():
    """A Loop that grows its state (Concat) must not fold Shape(v) at the first trip's shape: the body is left
    without shape points, and the result still matches onnxruntime."""
    body = helper.make_graph(
        [helper.make_node("Shape", ["v_in"], ["sh"]), helper.make_node("Cast", ["sh"], ["shf"], to=F),
         helper.make_node("ReduceSum", ["shf"], ["n"], keepdims=1),
         helper.make_node("Concat", ["v_in", "n"], ["v_out"], axis=0),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                 helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                 helper.make_tensor_value_info("v_in", F, None)],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", F, None)])
    graph = helper.make_graph([helper.make_node("Loop", ["M", "", "x"], ["y"], body=body)], "grow",
                              [helper.make_tensor_value_info("x", F, [2])], [helper.make_tensor_value_info("y", F, None)],
                              [_const("M", 3, np.int64)])
    engine, _ = check_fused(_model(graph), {"x": np.array([1.0, 2.0], np.float32)})
    assert engine.data.build_info["passes"]["bodies"] == 1


def test_the_state_shape_check_matters(monkeypatch):
    """Broken on purpose (state shapes assumed kept): Shape(v) folds at the first trip's shape and the grown
    state comes out wrong, which the onnxruntime comparison catches."""
    from tensorforge.passes import subgraphs
    monkeypatch.setattr(subgraphs, "_keeps_state_shapes", lambda *a: True)
    test = globals()["test_state_whose_shape_changes_gets_no_shape_points"]
    with pytest.raises(AssertionError, match="Mismatched|mismatch|not close|violations"):
        test()


def test_optimised_body_survives_the_engine_file(tmp_path):
    import tensorforge as tfg
    x = {"x": np.random.randn(2, 8).astype(np.float32)}
    engine, _ = check_fused(_loop_model(), x)
    engine.save(tmp_path / "loop.tfg")
    loaded = tfg.load(tmp_path / "loop.tfg", device="cpu")
    np.testing.assert_allclose(loaded.run(dict(x))["y"], engine.run(dict(x))["y"], rtol=1e-6, atol=1e-7)
