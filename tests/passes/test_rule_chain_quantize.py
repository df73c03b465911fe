"""pointwise-chains takes a per-tensor QuantizeLinear into the chain that produces its input: squeeze-excite's
x · σ(g) → Q becomes one chain writing int8 codes (no float tensor written and read back by a standalone Q).
Checked against onnxruntime (codes within one step on ≤ 1 % of elements: torch's and onnxruntime's σ may differ in
the last float bit next to a tie) and the unfused build (every code equal); a per-axis Q stays standalone, with
its reason recorded."""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from fusion_helpers import build_logged, ort_run
import tensorforge as tfg


def _se_gate_q(per_axis=False) -> bytes:
    scale = np.full((16,), 0.031, np.float32) if per_axis else np.array(0.031, np.float32)
    zp = np.full((16,), -2, np.int8) if per_axis else np.array(-2, np.int8)
    nodes = [helper.make_node("Sigmoid", ["g"], ["gs"]), helper.make_node("Mul", ["x", "gs"], ["m"]),
             helper.make_node("QuantizeLinear", ["m", "s", "z"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "se_q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16, 9, 9]),
                                              helper.make_tensor_value_info("g", TensorProto.FLOAT, [2, 16, 1, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.INT8, [2, 16, 9, 9])],
                              [numpy_helper.from_array(scale, "s"), numpy_helper.from_array(zp, "z")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8).SerializeToString()


def _feeds(seed=0):
    r = np.random.RandomState(seed)
    return {"x": (r.randn(2, 16, 9, 9) * 3).astype(np.float32), "g": r.randn(2, 16, 1, 1).astype(np.float32)}


def test_se_gate_and_quantize_are_one_chain_writing_int8():
    model, feeds = _se_gate_q(), _feeds()
    engine, _ = build_logged(model)
    layers = engine.data.layers
    assert [la.op for la in layers] == ["Sigmoid", "PointwiseChain"]     # σ(g) has the gate's (N, C, 1, 1) shape
    chain = layers[1]
    assert [s["op"] for s in chain.attrs["steps"]] == ["Mul", "QuantizeLinear"]
    assert chain.attrs["out_dtypes"] == ["int8"]
    got = np.asarray(engine.run(dict(feeds))["y"])
    want = ort_run(model, feeds)["y"]
    off = np.abs(got.astype(np.int32) - want.astype(np.int32))
    assert got.dtype == np.int8 and off.max() <= 1 and (off > 0).mean() <= 0.01
    assert len(np.unique(want)) > 100                       # the codes are spread, not a constant
    plain = tfg.build(model, device="cpu", optimization_level=0)
    assert "QuantizeLinear" in [la.op for la in plain.data.layers]
    np.testing.assert_array_equal(got, np.asarray(plain.run(dict(feeds))["y"]))


def test_per_axis_quantize_stays_standalone_with_its_reason():
    engine, text = build_logged(_se_gate_q(per_axis=True))
    assert [la.op for la in engine.data.layers] == ["Sigmoid", "PointwiseChain", "QuantizeLinear"]
    assert "per-axis, computed or non-float32 scale" in text
    model, feeds = _se_gate_q(per_axis=True), _feeds(1)
    got = np.asarray(engine.run(dict(feeds))["y"]).astype(np.int32)
    off = np.abs(got - ort_run(model, feeds)["y"].astype(np.int32))
    assert off.max() <= 1 and (off > 0).mean() <= 0.01
