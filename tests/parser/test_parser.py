"""The ONNX parser's contract: external data files, initializers that shadow inputs, Constant nodes, IR names
following the model's names, and per-node errors that name the node, op_type, opset and what to do."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from oracle import check_against_ort, ort_run
from tensorforge.parser import parse_model
from tensorforge.util.errors import ModelError, UnsupportedOpError


def _gemm_model(w: np.ndarray, opset=17) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"), helper.make_node("Relu", ["h"], ["y"], name="act")],
        "ext", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, w.shape[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, w.shape[1]])],
        initializer=[numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def test_external_data_is_read_relative_to_the_model(tmp_path):
    w = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    model = _gemm_model(w)
    path = tmp_path / "model.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="weights.bin", size_threshold=0)
    assert (tmp_path / "weights.bin").stat().st_size == w.nbytes
    x = np.random.default_rng(1).standard_normal((2, 64)).astype(np.float32)
    engine = tfg.build(str(path), device="cpu")
    np.testing.assert_allclose(engine.run({"x": x})["y"], np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)


def test_missing_external_data_file_is_a_model_error(tmp_path):
    model = _gemm_model(np.ones((8, 4), np.float32))
    path = tmp_path / "model.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="weights.bin", size_threshold=0)
    (tmp_path / "weights.bin").unlink()
    with pytest.raises(ModelError) as err:
        parse_model(str(path))
    assert "\n" not in str(err.value) and "'w'" in str(err.value) and "external data" in str(err.value)


def test_initializer_shadowing_an_input_is_a_weight_and_names_follow_the_model():
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    model = _gemm_model(w)
    model.graph.input.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [3, 4]))   # IR < 4 style
    net = parse_model(model)
    assert net.inputs == ["x"] and "w" in net.constants
    assert [layer.outputs for layer in net.layers] == [["h"], ["y"]] and net.outputs == ["y"]


def test_constant_nodes_of_every_value_kind(tmp_path):
    nodes = [helper.make_node("Constant", [], ["c_t"], value=numpy_helper.from_array(np.float32([1, 2, 3]))),
             helper.make_node("Constant", [], ["c_f"], value_float=0.5),
             helper.make_node("Constant", [], ["c_fs"], value_floats=[1.0, -1.0, 2.0]),
             helper.make_node("Constant", [], ["c_i"], value_int=2),
             helper.make_node("Cast", ["c_i"], ["c_i_f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "c_t"], ["a"]), helper.make_node("Add", ["a", "c_f"], ["b"]),
             helper.make_node("Mul", ["b", "c_fs"], ["c"]), helper.make_node("Pow", ["c", "c_i_f"], ["y"])]
    graph = helper.make_graph(nodes, "consts", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    x = np.random.default_rng(2).standard_normal((2, 3)).astype(np.float32)
    check_against_ort(model, {"x": x}, tmp_path=tmp_path)


def test_unverified_op_version_names_op_version_and_verified_versions():
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"], name="old_add", broadcast=0)], "old",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 5)])     # resolves to Add-1
    with pytest.raises(UnsupportedOpError) as err:
        parse_model(model)
    msg = str(err.value)
    assert "'old_add'" in msg and "Add version 1" in msg and "verified versions: 6, 7, 13, 14" in msg and "\n" not in msg


def test_node_reading_an_undefined_tensor_is_reported_by_name():
    graph = helper.make_graph([helper.make_node("Relu", ["nowhere"], ["y"], name="r")], "bad",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ModelError, match="node 'r' .*reads 'nowhere'"):
        parse_model(model)


def test_graph_output_that_is_an_input_passes_through():
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "passthrough",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3]),
                               helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    x = np.float32([-1, 0, 2])
    out = tfg.build(model.SerializeToString(), device="cpu").run({"x": x})
    want = ort_run(model.SerializeToString(), {"x": x})
    np.testing.assert_array_equal(out["y"], want["y"])
    np.testing.assert_array_equal(out["x"], x)
