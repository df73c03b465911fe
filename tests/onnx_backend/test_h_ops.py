"""Ops of this family that the ONNX suite does not reach (or reaches only partly), against onnxruntime,
onnx.reference or precise properties; and the builder's placeholders for run-time shapes."""

import numpy as np
import onnx.reference
import onnxruntime as ort
import torch
from onnx import TensorProto, helper

import tensorforge as tfg
from tensorforge.ir import Network
from tensorforge.ir.dynamic import placeholder_info
from tensorforge.ir.interpret import propagate


def _model(nodes, inputs, outputs, opsets=(("", 22),), initializers=()):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers)),
                          opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    m.ir_version = 10
    return m


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _run(model, feeds):
    engine = tfg.build(model.SerializeToString(), device="cpu")
    return engine, engine.run(dict(feeds))


def test_max_roi_pool_matches_onnxruntime():
    m = _model([helper.make_node("MaxRoiPool", ["x", "rois"], ["y"], pooled_shape=[2, 3], spatial_scale=0.5)],
               [_vi("x", TensorProto.FLOAT, [2, 3, 8, 10]), _vi("rois", TensorProto.FLOAT, [3, 5])],
               [_vi("y", TensorProto.FLOAT, [3, 3, 2, 3])], opsets=(("", 21),))
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 10)).astype(np.float32)
    rois = np.array([[0, 0, 0, 9, 7], [1, 2, 3, 17, 15], [0, 4, 2, 6, 5]], np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x, "rois": rois})
    np.testing.assert_array_equal(_run(m, {"x": x, "rois": rois})[1]["y"], want[0])


def test_numeric_label_encoder_matches_reference():
    node = helper.make_node("LabelEncoder", ["x"], ["y"], domain="ai.onnx.ml", keys_int64s=[1, 3, 7],
                            values_floats=[0.5, -2.0, 9.0], default_float=-1.0)
    m = _model([node], [_vi("x", TensorProto.INT64, [6])], [_vi("y", TensorProto.FLOAT, [6])],
               opsets=(("", 17), ("ai.onnx.ml", 2)))
    x = np.array([7, 1, 2, 3, 3, 0], np.int64)
    want = onnx.reference.ReferenceEvaluator(m).run(None, {"x": x})[0]
    np.testing.assert_array_equal(_run(m, {"x": x})[1]["y"], want)


def test_random_ops_sample_at_run_time_with_the_right_law():
    m = _model([helper.make_node("RandomNormal", [], ["n"], shape=[20000], mean=3.0, scale=0.5),
                helper.make_node("RandomUniformLike", ["x"], ["u"], low=-1.0, high=2.0),
                helper.make_node("Multinomial", ["logits"], ["k"], sample_size=4000, seed=2.0)],
               [_vi("x", TensorProto.FLOAT, [20000]), _vi("logits", TensorProto.FLOAT, [1, 3])],
               [_vi("n", TensorProto.FLOAT, [20000]), _vi("u", TensorProto.FLOAT, [20000]), _vi("k", TensorProto.INT32, [1, 4000])])
    feeds = {"x": np.zeros(20000, np.float32), "logits": np.log(np.array([[0.2, 0.3, 0.5]], np.float32))}
    engine, first = _run(m, feeds)
    second = engine.run(dict(feeds))
    assert any(la.op == "RandomNormal" for la in engine.data.layers)                           # never folded
    assert abs(first["n"].mean() - 3.0) < 0.02 and abs(first["n"].std() - 0.5) < 0.02
    assert not np.array_equal(first["n"], second["n"])                                         # fresh samples
    assert first["u"].min() >= -1.0 and first["u"].max() < 2.0 and abs(first["u"].mean() - 0.5) < 0.03
    freq = np.bincount(first["k"].reshape(-1), minlength=3) / 4000
    np.testing.assert_allclose(freq, [0.2, 0.3, 0.5], atol=0.03)
    assert first["k"].dtype == np.int32 and np.array_equal(first["k"], second["k"])            # seeded: reproducible


def test_placeholders_for_run_time_shapes():
    """Data-dependent (Unique) and value-dependent (Reshape by a fed shape) outputs become placeholders:
    rank known / unknown, never real values, and everything downstream follows."""
    net = Network("n")
    net.add_input("x", torch.float32, (6,))
    net.add_input("s", torch.int64, (2,))
    net.add_layer("Unique", ["x"], ["u", "i", "inv", "c"], {"axis": None, "sorted": 1})
    net.add_layer("Shape", ["u"], ["us"], {"start": 0, "end": None})
    net.add_layer("Reshape", ["x", "s"], ["r"], {"allowzero": 0})
    net.add_layer("Relu", ["r"], ["rr"], {})
    for name in ("u", "us", "rr"):
        net.mark_output(name)
    env = propagate(net, {"x": (6,), "s": (2,)})
    assert placeholder_info(env["u"]).rank_known and env["u"].dim() == 1
    assert placeholder_info(env["us"]) is not None and env["us"].device.type == "meta"   # not a folded value
    assert not placeholder_info(env["r"]).rank_known and not placeholder_info(env["rr"]).rank_known
    assert placeholder_info(env["x"]) is None
