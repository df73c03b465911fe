"""com.microsoft QGemm against onnxruntime — exact for quantized outputs, rtol 1e-3 / atol 1e-4 for float ones: a
Gemm model quantized by onnxruntime's quantize_static (QOperator format, per-tensor and per-channel weights),
hand-built nodes for alpha / transA / transB / int32 C / float output / uint8 weights, the int_mm and float_exact
tactics against the op's own float64 reference, and a refusal with a reason."""

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from oracle import check_against_ort
from tensorforge.ir import get_spec
from tensorforge.util.errors import UnsupportedOpError

quantization = pytest.importorskip("onnxruntime.quantization")
RNG = np.random.default_rng(5)
U8, I8 = TensorProto.UINT8, TensorProto.INT8


def _gemm_model():
    inits = [numpy_helper.from_array((RNG.normal(size=(16, 8)) * 0.5).astype(np.float32), "W"),
             numpy_helper.from_array(RNG.normal(size=8).astype(np.float32), "b"),
             numpy_helper.from_array((RNG.normal(size=(16, 8)) * 0.5).astype(np.float32), "W2"),
             numpy_helper.from_array(RNG.normal(size=16).astype(np.float32), "b2")]
    nodes = [helper.make_node("Gemm", ["x", "W", "b"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "W2", "b2"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 9
    return m


class _Reader(quantization.CalibrationDataReader):
    def __init__(self):
        self.batches = iter([{"x": RNG.normal(size=(4, 16)).astype(np.float32)} for _ in range(4)])

    def get_next(self):
        return next(self.batches, None)


@pytest.mark.parametrize("per_channel,activation", [(False, "QUInt8"), (True, "QUInt8"), (True, "QInt8")])
def test_qgemm_from_quantize_static(tmp_path, per_channel, activation):
    src, dst = tmp_path / "g.onnx", tmp_path / "g_q.onnx"
    onnx.save(_gemm_model(), src)
    quantization.quantize_static(str(src), str(dst), _Reader(), quant_format=quantization.QuantFormat.QOperator,
                                 per_channel=per_channel, activation_type=getattr(quantization.QuantType, activation),
                                 weight_type=quantization.QuantType.QInt8)
    q = onnx.load(dst)
    assert [n.op_type for n in q.graph.node].count("QGemm") == 2, [n.op_type for n in q.graph.node]
    check_against_ort(q, {"x": RNG.normal(size=(4, 16)).astype(np.float32)})


def _qgemm_model(m, k, n, *, a_type=U8, b_type=I8, per_column=True, with_c=True, quantized_out=True, alpha=1.0,
                 trans_a=0, trans_b=0):
    np_a = np.uint8 if a_type == U8 else np.int8
    np_b = np.uint8 if b_type == U8 else np.int8
    b_shape = (n, k) if trans_b else (k, n)
    lo, hi = (0, 256) if b_type == U8 else (-128, 128)
    cols = n if per_column else 1
    inits = {"a_scale": np.array(0.03, np.float32), "a_zp": np.array(131 if a_type == U8 else -3, np_a),
             "b": RNG.integers(lo, hi, b_shape).astype(np_b),
             "b_scale": (RNG.random(cols) * 0.02 + 0.005).astype(np.float32).reshape(-1 if per_column else ()),
             "b_zp": (RNG.integers(120, 136, cols) if b_type == U8 else np.zeros(cols)).astype(np_b)
             .reshape(-1 if per_column else ()),
             "c": RNG.integers(-2000, 2000, n).astype(np.int32),
             "y_scale": np.array(0.4, np.float32), "y_zp": np.array(100 if a_type == U8 else 5, np_a)}
    ins = ["a", "a_scale", "a_zp", "b", "b_scale", "b_zp", "c" if with_c else ""]
    if quantized_out:
        ins += ["y_scale", "y_zp"]
    while not ins[-1]:
        ins.pop()
    node = helper.make_node("QGemm", ins, ["y"], domain="com.microsoft", alpha=alpha, transA=trans_a, transB=trans_b)
    a_shape = [k, m] if trans_a else [m, k]
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("a", a_type, a_shape)],
                          [helper.make_tensor_value_info("y", a_type if quantized_out else TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(v, key) for key, v in inits.items() if key in ins])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 9
    a = RNG.integers(0, 256, a_shape).astype(np.uint8) if a_type == U8 else \
        RNG.integers(-128, 128, a_shape).astype(np.int8)
    return model, {"a": a}


@pytest.mark.parametrize("kw", [dict(), dict(per_column=False), dict(with_c=False), dict(quantized_out=False),
                                dict(alpha=0.5, trans_a=1), dict(trans_b=1, quantized_out=False, alpha=2.0),
                                dict(a_type=I8, trans_b=1), dict(b_type=U8, per_column=False),
                                dict(b_type=U8, quantized_out=False)])
def test_qgemm_nodes(kw):
    model, feeds = _qgemm_model(5, 24, 7, **kw)
    check_against_ort(model, feeds)


@pytest.mark.parametrize("tactic_name", ["QGemmIntMM", "QGemmFloatExact"])
@pytest.mark.parametrize("k,kw", [(40, dict()), (40, dict(b_type=U8, per_column=False, trans_a=1)),
                                  (40, dict(quantized_out=False)), (1100, dict(quantized_out=False)),
                                  (700, dict(b_type=U8, trans_b=1))])
def test_qgemm_tactics_match_reference(tactic_name, k, kw):
    """The torch._int_mm and float_exact tactics equal the float64 reference bit for bit (integers summed exactly
    every way; K = 700 and 1100 make float_exact cut K into chunks)."""
    from tensorforge.kernels import contrib_quant
    model, feeds = _qgemm_model(9, k, 11, **kw)
    inits = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy()) for t in model.graph.initializer}
    node = model.graph.node[0]
    args = [torch.from_numpy(feeds["a"]) if name == "a" else (inits[name] if name else None) for name in node.input]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    want = get_spec("QGemm").reference(*args, **attrs)
    layer = type("L", (), {"attrs": attrs, "outputs": ["y"], "op": "QGemm"})()
    got = getattr(contrib_quant, tactic_name).build(layer, {}, torch.device("cpu"))(args)[0]
    assert got.dtype == want.dtype and torch.equal(got, want)


def test_qgemm_refuses_half_quantized_output():
    model, _ = _qgemm_model(2, 8, 3)
    del model.graph.node[0].input[-1]           # y_scale without y_zero_point
    with pytest.raises(UnsupportedOpError, match="y_scale / y_zero_point"):
        tfg.build(model.SerializeToString(), device="cpu")


def test_float_exact_chunks_where_one_float32_gemm_would_round():
    """Worst-case operands (every |a − za|·|b| at its maximum, K = 1100): one float32 accumulator leaves 2²⁴ and
    rounds, the chunked float_exact sum does not. The premise is shown on a sequential float32 sum (one GEMM
    accumulator's order), not on torch.matmul: how a CPU BLAS splits K over its accumulators differs between
    machines, and with enough of them each partial sum stays under 2²⁴ (seen on a 2026-12 CI-class machine)."""
    from tensorforge.kernels.contrib_quant import exact_chunk, float_exact_matmul
    k = 1100
    a_c = torch.full((3, k), 255.0)
    b_c = torch.full((k, 2), 127.0)
    want = a_c.double() @ b_c.double()                      # 35 623 500: beyond 2²⁴
    acc = np.float32(0.0)
    for _ in range(k):                                      # one accumulator, in K order, rounded at every step
        acc = np.float32(acc + np.float32(255.0 * 127.0))
    assert float(acc) != float(want[0, 0])
    assert exact_chunk(b_c) < k
    assert torch.equal(float_exact_matmul(a_c, b_c, exact_chunk(b_c)), want)
