"""Opset-6 importers (parser/importers/legacy.py): legacy `broadcast`/`axis`, PRelu-6's slopes, Max/Min/Sum-6.

Oracles are numpy computations written here from the ONNX-6 operator text (B matched to A from `axis` on;
a slope shared, per element, or — the Caffe2 form exporters wrote — per channel); refused nodes must raise a
ModelError naming the node and telling what to do.
"""

import numpy as np
import pytest
from onnx import TensorProto, helper

import tensorforge as tfg
from tensorforge.util.errors import ModelError


def _model(node, shapes, opset=6):
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in shapes.items()]
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 3
    return m.SerializeToString()


def _run(node, feeds):
    engine = tfg.build(_model(node, {k: list(v.shape) for k, v in feeds.items()}), device="cpu")
    return engine.run(dict(feeds))["y"]


_rng = np.random.default_rng(6)
A4 = _rng.standard_normal((2, 3, 4, 5)).astype(np.float32)


@pytest.mark.parametrize("op,fn", [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", np.divide)])
def test_legacy_broadcast_with_axis_matches_b_from_axis(op, fn):
    """B (3, 4) at axis 1 of A (2, 3, 4, 5): B[j, k] meets A[:, j, k, :] — not numpy's trailing alignment."""
    b = _rng.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    want = np.empty_like(A4)
    for j in range(3):
        for k in range(4):
            want[:, j, k, :] = fn(A4[:, j, k, :], b[j, k])
    node = helper.make_node(op, ["a", "b"], ["y"], broadcast=1, axis=1)
    np.testing.assert_allclose(_run(node, {"a": A4, "b": b}), want, rtol=1e-6)


def test_legacy_broadcast_without_axis_is_trailing():
    b = _rng.standard_normal((4, 5)).astype(np.float32)
    node = helper.make_node("Add", ["a", "b"], ["y"], broadcast=1)
    np.testing.assert_allclose(_run(node, {"a": A4, "b": b}), A4 + b, rtol=1e-6)


def test_no_broadcast_same_shapes():
    b = _rng.standard_normal(A4.shape).astype(np.float32)
    np.testing.assert_allclose(_run(helper.make_node("Mul", ["a", "b"], ["y"]), {"a": A4, "b": b}), A4 * b)


def test_no_broadcast_different_shapes_is_refused():
    node = helper.make_node("Add", ["a", "b"], ["y"], name="flat_add")
    with pytest.raises(ModelError, match="flat_add.*must have one shape"):
        _run(node, {"a": A4, "b": np.ones((5,), np.float32)})


def test_pow_1_legacy_broadcast_with_axis():
    a = np.abs(A4) + 0.5
    b = np.array([1.0, 2.0, 0.5], np.float32)
    node = helper.make_node("Pow", ["a", "b"], ["y"], broadcast=1, axis=1)
    want = a ** b.reshape(1, 3, 1, 1)
    np.testing.assert_allclose(_run(node, {"a": a, "b": b}), want, rtol=1e-5)
    engine = tfg.build(_model(node, {"a": list(a.shape), "b": [3]}, opset=1), device="cpu")
    np.testing.assert_allclose(engine.run({"a": a, "b": b})["y"], want, rtol=1e-5)


@pytest.mark.parametrize("b_shape,axis", [((3,), 0), ((5, 4), 2), ((2, 3, 4, 5, 1), None)])
def test_legacy_broadcast_that_does_not_map_b_onto_a_is_refused(b_shape, axis):
    b = np.ones(b_shape, np.float32)
    attrs = {"broadcast": 1} if axis is None else {"broadcast": 1, "axis": axis}
    node = helper.make_node("Add", ["a", "b"], ["y"], name="legacy_add", **attrs)
    with pytest.raises(ModelError, match="legacy_add.*Add, opset 6") as err:
        _run(node, {"a": A4, "b": b})
    assert "opset 7 or later" in str(err.value)


def test_legacy_broadcast_b_wider_than_a_is_refused():
    a = np.ones((2, 1), np.float32)
    node = helper.make_node("Add", ["a", "b"], ["y"], name="widen", broadcast=1)
    with pytest.raises(ModelError, match="widen"):
        _run(node, {"a": a, "b": np.ones((2, 3), np.float32)})


@pytest.mark.parametrize("slope_shape", [(1,), (3,), (2, 3, 4, 5)])
def test_prelu_6_shared_per_channel_per_element(slope_shape):
    slope = _rng.uniform(0.1, 0.9, slope_shape).astype(np.float32)
    if slope_shape == (3,):
        s = slope.reshape(1, 3, 1, 1)                     # one slope per channel (dim 1)
    else:
        s = slope if slope.size > 1 else slope[0]
    want = np.where(A4 < 0, A4 * s, A4)
    np.testing.assert_allclose(_run(helper.make_node("PRelu", ["x", "s"], ["y"]), {"x": A4, "s": slope}), want,
                               rtol=1e-6)


def test_prelu_6_other_slope_is_refused():
    node = helper.make_node("PRelu", ["x", "s"], ["y"], name="odd_prelu")
    with pytest.raises(ModelError, match="odd_prelu.*neither shared, per channel nor per element"):
        _run(node, {"x": A4, "s": np.ones((5,), np.float32)})


@pytest.mark.parametrize("op,fn", [("Max", np.maximum), ("Min", np.minimum), ("Sum", np.add)])
def test_max_min_sum_6(op, fn):
    x = [_rng.standard_normal((3, 4)).astype(np.float32) for _ in range(3)]
    node = helper.make_node(op, ["a", "b", "c"], ["y"])
    np.testing.assert_allclose(_run(node, dict(zip("abc", x))), fn(fn(x[0], x[1]), x[2]), rtol=1e-6)
