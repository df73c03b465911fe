"""bench/ort_int8.py, the onnxruntime-INT8 yardstick beside the INT8 rows: which MatMuls stay float (checked on a
graph built by hand), and that its outputs are quantized (not equal to fp32, as they would be if onnxruntime had
quantized nothing) yet close to fp32 onnxruntime on the tiny CNN (cosine > 0.95: not garbage)."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime.quantization")
ort_int8 = pytest.importorskip("ort_int8")
zoo = pytest.importorskip("zoo")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def test_only_matmuls_of_two_computed_tensors_stay_float():
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.ones((4, 4), np.float32))),
             helper.make_node("MatMul", ["x", "x"], ["aa"], name="act_act"),
             helper.make_node("MatMul", ["aa", "w"], ["aw"], name="act_init"),
             helper.make_node("MatMul", ["aw", "c"], ["y"], name="act_const")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])], [w])
    assert ort_int8._float_matmuls(helper.make_model(graph)) == ["act_act"]


def test_outputs_are_quantized_and_close_to_fp32():
    from zoo_case import ort_reference
    data, _ = zoo.export("tiny_cnn", zoo.make("tiny_cnn"))
    calib = zoo.example("tiny_cnn", 8, seed=1).numpy()
    test = zoo.example("tiny_cnn", 8, seed=2).numpy()
    got, want = ort_int8.ort_int8_outputs(data, calib, test, threads=1), ort_reference(data, test, threads=1)
    assert got.shape == want.shape
    assert not np.array_equal(got, want)
    cos = float((got * want).sum() / np.linalg.norm(got) / np.linalg.norm(want))
    assert 0.95 < cos < 1.0
