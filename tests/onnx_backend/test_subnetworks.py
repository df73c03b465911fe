"""Control flow, sequences, data-dependent shapes and sub-byte constants, end to end against onnxruntime:
build → engine bytes → load → run. Control-flow bodies must be stored in the engine as data."""

import json
import struct

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import tensorforge as tfg
from tensorforge.api.high_level import Engine
from tensorforge.engine import from_bytes


def _model(nodes, inputs, outputs, opset=17, initializers=()):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers)),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _build_and_compare(model, feeds, rtol=1e-5, atol=1e-6):
    """Outputs of a freshly built engine and of its serialized copy, both against onnxruntime."""
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    engine = tfg.build(model.SerializeToString(), device="cpu")
    data = engine.serialize()
    for e in (engine, Engine(from_bytes(data), "cpu")):
        got = e.run(dict(feeds))
        for name, w in zip(e.output_names, want):
            g = got[name]
            assert g.shape == w.shape and g.dtype == w.dtype, name
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=name)
    return engine, data


def _manifest(data: bytes) -> dict:
    mlen = struct.unpack_from("<8sIQQ32s", data)[2]
    return json.loads(data[60:60 + mlen])


def test_if_reads_outer_tensors_and_is_stored_as_data():
    then_g = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["t"])], "then", [], [_vi("t", TensorProto.FLOAT, [3])])
    else_g = helper.make_graph([helper.make_node("Sub", ["x", "w"], ["e"])], "else", [], [_vi("e", TensorProto.FLOAT, [3])])
    m = _model([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                helper.make_node("Greater", ["s", "zero"], ["c"]),
                helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
               [_vi("x", TensorProto.FLOAT, [3])], [_vi("y", TensorProto.FLOAT, [3])], opset=11,
               initializers=[helper.make_tensor("w", TensorProto.FLOAT, [3], [2, 3, 4]),
                             helper.make_tensor("zero", TensorProto.FLOAT, [], [0])])
    for x in (np.array([1, 2, 3], np.float32), np.array([-5, 1, 1], np.float32)):
        engine, data = _build_and_compare(m, {"x": x})
    if_layer = next(la for la in engine.data.layers if la.op == "If")
    assert if_layer.attrs["then_branch"].layers[0].tactic is not None    # body layers got kernels at load
    layer = next(la for la in _manifest(data)["layers"] if la["op"] == "If")
    assert layer["tactic"] == "if.subnetwork"               # the body runs through kernels (kernels/subnetwork.py)
    body = layer["attrs"]["then_branch"]["$network"]
    # the outer constant w became a constant of the body (passes/subgraphs.py); x is still captured
    assert [la["op"] for la in body["layers"]] == ["Mul"] and body["inputs"] == ["x"]


def test_loop_with_carried_state_and_scan_output():
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "step"], ["acc_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Mul", ["acc_out", "acc_out"], ["sq"])],
        "body", [_vi("i", TensorProto.INT64, []), _vi("cond_in", TensorProto.BOOL, []),
                 _vi("acc_in", TensorProto.FLOAT, [2])],
        [_vi("cond_out", TensorProto.BOOL, []), _vi("acc_out", TensorProto.FLOAT, [2]), _vi("sq", TensorProto.FLOAT, [2])])
    m = _model([helper.make_node("Loop", ["n", "c", "a0"], ["a", "sqs"], body=body)],
               [_vi("n", TensorProto.INT64, []), _vi("c", TensorProto.BOOL, []), _vi("a0", TensorProto.FLOAT, [2])],
               [_vi("a", TensorProto.FLOAT, [2]), _vi("sqs", TensorProto.FLOAT, None)], opset=13,
               initializers=[helper.make_tensor("step", TensorProto.FLOAT, [2], [0.5, -1.0])])
    feeds = {"n": np.array(4, np.int64), "c": np.array(True), "a0": np.array([1, 2], np.float32)}
    _build_and_compare(m, feeds)


def test_scan_reverse_direction():
    body = helper.make_graph([helper.make_node("Add", ["s", "x"], ["s2"]), helper.make_node("Identity", ["s2"], ["y"])],
                             "body", [_vi("s", TensorProto.FLOAT, [2]), _vi("x", TensorProto.FLOAT, [2])],
                             [_vi("s2", TensorProto.FLOAT, [2]), _vi("y", TensorProto.FLOAT, [2])])
    m = _model([helper.make_node("Scan", ["s0", "xs"], ["s", "ys"], body=body, num_scan_inputs=1,
                                 scan_input_directions=[1])],
               [_vi("s0", TensorProto.FLOAT, [2]), _vi("xs", TensorProto.FLOAT, [4, 2])],
               [_vi("s", TensorProto.FLOAT, [2]), _vi("ys", TensorProto.FLOAT, [4, 2])], opset=16)
    _build_and_compare(m, {"s0": np.zeros(2, np.float32), "xs": np.arange(8, dtype=np.float32).reshape(4, 2)})


def test_sequence_round_trip():
    m = _model([helper.make_node("SplitToSequence", ["x"], ["seq"], axis=1),
                helper.make_node("SequenceErase", ["seq", "minus1"], ["seq2"]),
                helper.make_node("SequenceLength", ["seq2"], ["n"]),
                helper.make_node("ConcatFromSequence", ["seq2"], ["y"], axis=0, new_axis=1)],
               [_vi("x", TensorProto.FLOAT, [2, 3])],
               [_vi("y", TensorProto.FLOAT, None), _vi("n", TensorProto.INT64, [])],
               initializers=[helper.make_tensor("minus1", TensorProto.INT64, [], [-1])])
    _build_and_compare(m, {"x": np.arange(6, dtype=np.float32).reshape(2, 3)})


def test_data_dependent_shapes_flow_downstream():
    """Unique's row count depends on the data: the engine records -1 and still runs both inputs right."""
    m = _model([helper.make_node("Unique", ["x"], ["u", "idx", "inv", "cnt"], sorted=1),
                helper.make_node("Mul", ["u", "u"], ["y"]), helper.make_node("Shape", ["y"], ["n"])],
               [_vi("x", TensorProto.FLOAT, [6])],
               [_vi("y", TensorProto.FLOAT, None), _vi("cnt", TensorProto.INT64, None), _vi("n", TensorProto.INT64, None)])
    for x in ([3, 1, 3, 2, 1, 3], [5, 5, 5, 5, 5, 5]):
        engine, _ = _build_and_compare(m, {"x": np.array(x, np.float32)})
    assert engine.data.tensors["y"].shape == (-1,)
    assert not any(la.placement == "host" for la in engine.data.layers if la.op == "Shape")   # never folded


@pytest.mark.parametrize("elem", [TensorProto.INT4, TensorProto.UINT4])
def test_int4_zero_point_constant_survives_the_engine_file(elem):
    lo, hi = (-8, 7) if elem == TensorProto.INT4 else (0, 15)
    zp = helper.make_tensor("zp", elem, [], [1])
    m = _model([helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["q"]),
                helper.make_node("DequantizeLinear", ["q", "scale", "zp"], ["y"])],
               [_vi("x", TensorProto.FLOAT, [6])], [_vi("y", TensorProto.FLOAT, [6])], opset=21,
               initializers=[helper.make_tensor("scale", TensorProto.FLOAT, [], [0.5]), zp])
    x = np.array([-9, -1.2, 0, 0.74, 3, 40], np.float32)
    _, data = _build_and_compare(m, {"x": x})
    assert any(v == onnx.helper.tensor_dtype_to_np_dtype(elem).name for v in _manifest(data)["byte_stored"].values())
    expected = (np.clip(np.round(x / 0.5) + 1, lo, hi) - 1) * 0.5
    y = Engine(from_bytes(data), "cpu").run({"x": x})["y"]
    np.testing.assert_array_equal(y, expected.astype(np.float32))


def test_nested_if_in_loop_reads_the_top_level_graph():
    """The If inside the Loop body reads `w`, an initializer two scopes up: captured through both bodies."""
    then_g = helper.make_graph([helper.make_node("Add", ["acc_in", "w"], ["t"])], "then", [], [_vi("t", TensorProto.FLOAT, [2])])
    else_g = helper.make_graph([helper.make_node("Sub", ["acc_in", "w"], ["e"])], "else", [], [_vi("e", TensorProto.FLOAT, [2])])
    body = helper.make_graph(
        [helper.make_node("Mod", ["i", "two"], ["r"]), helper.make_node("Equal", ["r", "zero"], ["even"]),
         helper.make_node("If", ["even"], ["acc_out"], then_branch=then_g, else_branch=else_g),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body", [_vi("i", TensorProto.INT64, []), _vi("cond_in", TensorProto.BOOL, []), _vi("acc_in", TensorProto.FLOAT, [2])],
        [_vi("cond_out", TensorProto.BOOL, []), _vi("acc_out", TensorProto.FLOAT, [2])])
    m = _model([helper.make_node("Loop", ["n", "", "a0"], ["a"], body=body)],
               [_vi("n", TensorProto.INT64, []), _vi("a0", TensorProto.FLOAT, [2])], [_vi("a", TensorProto.FLOAT, [2])],
               opset=13, initializers=[helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 10.0]),
                                       helper.make_tensor("two", TensorProto.INT64, [], [2]),
                                       helper.make_tensor("zero", TensorProto.INT64, [], [0])])
    _build_and_compare(m, {"n": np.array(5, np.int64), "a0": np.zeros(2, np.float32)})
