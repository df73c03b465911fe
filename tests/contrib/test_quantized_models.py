"""Models quantized by onnxruntime's own quantizer, built in the test: a small residual CNN through
quantize_static in the QOperator format (QLinearConv, com.microsoft QLinearAdd / QLinearGlobalAveragePool /
QLinearSigmoid / QLinearConcat / QLinearMul) and a MatMul model through quantize_dynamic; compared with onnxruntime."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from oracle import check_against_ort

quantization = pytest.importorskip("onnxruntime.quantization")
RNG = np.random.default_rng(0)


def _cnn():
    def w(*s):
        return (RNG.normal(size=s) * 0.3).astype(np.float32)
    inits = {"w1": w(8, 3, 3, 3), "b1": w(8), "w2": w(8, 8, 3, 3), "b2": w(8), "m": w(1, 8, 1, 1)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["a"]),
             helper.make_node("Mul", ["a", "m"], ["am"]),
             helper.make_node("Sigmoid", ["am"], ["s"]),
             helper.make_node("Concat", ["s", "r1"], ["cat"], axis=1),
             helper.make_node("GlobalAveragePool", ["cat"], ["y"])]
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 16, 1, 1])],
                          [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


class _Reader(quantization.CalibrationDataReader):
    def __init__(self):
        self.batches = iter([{"x": RNG.normal(size=(2, 3, 8, 8)).astype(np.float32)} for _ in range(4)])

    def get_next(self):
        return next(self.batches, None)


def test_quantize_static_qoperator_cnn(tmp_path):
    src, dst = tmp_path / "cnn.onnx", tmp_path / "cnn_q.onnx"
    onnx.save(_cnn(), src)
    quantization.quantize_static(str(src), str(dst), _Reader(), quant_format=quantization.QuantFormat.QOperator,
                                 activation_type=quantization.QuantType.QUInt8,
                                 weight_type=quantization.QuantType.QInt8)
    q = onnx.load(dst)
    ms_ops = {n.op_type for n in q.graph.node if n.domain == "com.microsoft"}
    assert {"QLinearAdd", "QLinearGlobalAveragePool", "QLinearConcat"} <= ms_ops, ms_ops
    x = RNG.normal(size=(2, 3, 8, 8)).astype(np.float32)
    check_against_ort(q, {"x": x})


def test_quantize_dynamic_matmul(tmp_path):
    w = numpy_helper.from_array((RNG.normal(size=(16, 8)) * 0.5).astype(np.float32), "W")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    src, dst = tmp_path / "mm.onnx", tmp_path / "mm_q.onnx"
    onnx.save(m, src)
    quantization.quantize_dynamic(str(src), str(dst), weight_type=quantization.QuantType.QInt8)
    check_against_ort(onnx.load(dst), {"x": RNG.normal(size=(4, 16)).astype(np.float32)})


@pytest.mark.parametrize("symmetric,block,k", [(False, 32, 64), (True, 16, 48), (False, 32, 40)])
def test_matmul_nbits_from_onnxruntime_quantizer(symmetric, block, k):
    """onnxruntime's MatMulNBitsQuantizer turns a MatMul into com.microsoft MatMulNBits (4-bit blocks)."""
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer
    w = numpy_helper.from_array(RNG.normal(size=(k, 24)).astype(np.float32), "W")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "mm",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5, 24])], [w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    q = MatMulNBitsQuantizer(m, block_size=block, is_symmetric=symmetric)
    q.process()
    model = q.model.model
    assert [n.op_type for n in model.graph.node] == ["MatMulNBits"]
    check_against_ort(model, {"x": RNG.normal(size=(3, 5, k)).astype(np.float32)})
