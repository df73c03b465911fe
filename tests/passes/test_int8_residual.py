"""Implicit INT8 residuals on codes (passes/rules/qdq_dual.residuals_from_codes): a float residual y read beside
its own Q(y) becomes the quantized residual Q(y) — TensorRT's implicit-INT8 semantics, int8 in and int8 out —
and never in an explicit Q/DQ graph, whose float residual is kept exactly as written.

Oracle: the explicit Q/DQ graph of the semantics claimed, written by hand with the ranges given to the build
(ITensor.set_dynamic_range's dict: scale = amax / 127, weights per channel max|W| / 127) — Q/DQ at every conv
input and, for the new semantics, on the residual too — evaluated by onnxruntime with graph optimisations
disabled. The engine must match that graph to float rounding and differ from the float-residual graph by more."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from qdq_graphs import G, ort_exact
from tensorforge.builder import BuilderConfig

RNG = np.random.RandomState(3)
W1, W2, W3 = (RNG.randn(8, 8, 3, 3).astype(np.float32) * 0.25 for _ in range(3))
B1, B2, B3 = (RNG.randn(8).astype(np.float32) * 0.1 for _ in range(3))
RANGES = {"x": 3.0, "y1": 2.5, "y2": 3.5}
CONV = dict(pads=[1, 1, 1, 1], kernel_shape=[3, 3])


def float_model() -> bytes:
    """x → Conv → Relu → y1 → Conv → + y1 → Relu → y2 → Conv → out  (a residual block between two convs)."""
    inits = {"W1": W1, "B1": B1, "W2": W2, "B2": B2, "W3": W3, "B3": B3}
    nodes = [helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], **CONV), helper.make_node("Relu", ["c1"], ["y1"]),
             helper.make_node("Conv", ["y1", "W2", "B2"], ["c2"], **CONV), helper.make_node("Add", ["c2", "y1"], ["s"]),
             helper.make_node("Relu", ["s"], ["y2"]), helper.make_node("Conv", ["y2", "W3", "B3"], ["out"], **CONV)]
    g = helper.make_graph(nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 8, 8])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [2, 8, 8, 8])],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m.SerializeToString()


def explicit_model(quantized_residual: bool) -> tuple[bytes, str]:
    """The same network with the Q/DQ layers written out: int8, zero point 0, the scales of RANGES."""
    g = G()
    s = {k: v / 127 for k, v in RANGES.items()}
    x = g.input("x", [2, 8, 8, 8])
    y1 = g.node("Relu", [g.node("Conv", [g.qdq(x, s["x"], 0, np.int8), g.weight(W1, 0), g.const(B1)], **CONV)])
    c2 = g.node("Conv", [g.qdq(y1, s["y1"], 0, np.int8), g.weight(W2, 0), g.const(B2)], **CONV)
    r = g.qdq(y1, s["y1"], 0, np.int8) if quantized_residual else y1
    y2 = g.node("Relu", [g.node("Add", [c2, r])])
    out = g.node("Conv", [g.qdq(y2, s["y2"], 0, np.int8), g.weight(W3, 0), g.const(B3)], **CONV)
    g.output(out)
    return g.model(), out


def implicit_engine():
    return tfg.build(float_model(), config=BuilderConfig(int8=True, dynamic_ranges=dict(RANGES), device="cpu"),
                     device="cpu")


def test_the_implicit_residual_reads_codes_and_matches_the_quantized_residual_graph():
    x = RNG.randn(2, 8, 8, 8).astype(np.float32)
    engine = implicit_engine()
    convs = [la for la in engine.data.layers if la.op == "QuantizedConv"]
    assert len(convs) == 3, [la.op for la in engine.data.layers]
    assert all(len(la.outputs) == 1 for la in convs)                 # no float y beside Q(y) any more
    assert convs[0].attrs["y_dtype"] == "int8" and convs[1].attrs["y_dtype"] == "int8"
    assert convs[1].inputs[3] == convs[0].outputs[0]
    assert convs[1].attrs["residual_scale"] == pytest.approx(RANGES["y1"] / 127, rel=1e-6)
    got = engine.run({"x": x})["out"]
    qm, qout = explicit_model(True)
    fm, fout = explicit_model(False)
    want, float_res = ort_exact(qm, {"x": x})[qout], ort_exact(fm, {"x": x})[fout]
    err, other = np.abs(got - want).max(), np.abs(got - float_res).max()
    assert err <= 1e-4 * np.abs(want).max(), err
    assert other > 10 * max(err, 1e-6), (err, other)                 # the oracle tells the two semantics apart


def test_an_explicit_graph_keeps_its_float_residual():
    model, out = explicit_model(False)
    x = RNG.randn(2, 8, 8, 8).astype(np.float32)
    engine = tfg.build(model, device="cpu")
    convs = [la for la in engine.data.layers if la.op == "QuantizedConv"]
    assert len(convs) == 3
    res = [la for la in convs if len(la.inputs) > 3 and la.inputs[3]]
    assert len(res) == 1 and not res[0].attrs["residual_scale"]        # still the float y1
    np.testing.assert_allclose(engine.run({"x": x})[out], ort_exact(model, {"x": x})[out], rtol=1e-4, atol=1e-4)
