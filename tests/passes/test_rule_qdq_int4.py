"""Weight-only blocked int4 (opset 21 DequantizeLinear with block_size on a MatMul's weights, qdq_int4.py): the
weights stay int4 in the engine and the fused op matches onnxruntime's evaluation of the DQ → MatMul graph."""

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from fusion_helpers import build_logged, ops
from qdq_graphs import ort_exact

RNG = np.random.RandomState(5)


def _model(signed=True, zero_point=True, bias=True, k=64, n=24, bs=32):
    w = RNG.randint(-8, 8, (k, n)) if signed else RNG.randint(0, 16, (k, n))
    t4 = TensorProto.INT4 if signed else TensorProto.UINT4
    inits = [helper.make_tensor("w", t4, [k, n], w.flatten().tolist()),
             numpy_helper.from_array((RNG.rand(k // bs, n) * 0.05 + 0.01).astype(np.float32), "s")]
    dq_in = ["w", "s"]
    if zero_point:
        z = RNG.randint(-2, 3, (k // bs, n)) if signed else RNG.randint(6, 10, (k // bs, n))
        inits.append(helper.make_tensor("z", t4, [k // bs, n], z.flatten().tolist()))
        dq_in.append("z")
    nodes = [helper.make_node("DequantizeLinear", dq_in, ["wd"], axis=0, block_size=bs),
             helper.make_node("MatMul", ["x", "wd"], ["mm"])]
    out = "mm"
    if bias:
        inits.append(numpy_helper.from_array(RNG.randn(n).astype(np.float32), "b"))
        nodes.append(helper.make_node("Add", ["mm", "b"], ["y0"]))
        nodes.append(helper.make_node("Relu", ["y0"], ["y"]))
        out = "y"
    g = helper.make_graph(nodes, "w4", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5, k])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m.SerializeToString()


@pytest.mark.parametrize("signed,zero_point,bias", [(True, True, True), (False, True, False), (True, False, True)])
def test_blocked_int4_matmul_is_one_weight_only_op(signed, zero_point, bias):
    model = _model(signed, zero_point, bias)
    feeds = {"x": RNG.randn(3, 5, 64).astype(np.float32)}
    engine, _ = build_logged(model)
    assert ops(engine) == ["BlockQuantizedMatMul"]
    layer = engine.data.layers[0]
    assert engine.data.constants[layer.inputs[1]].dtype == (torch.int4 if signed else torch.uint4)
    assert layer.attrs["activation"] == ("Relu" if bias else "none")
    got, want = engine.run(dict(feeds)), ort_exact(model, feeds)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-5, atol=1e-5)


def test_int4_engine_round_trip(tmp_path):
    model = _model()
    feeds = {"x": RNG.randn(3, 5, 64).astype(np.float32)}
    engine = tfg.build(model, device="cpu")
    engine.save(str(tmp_path / "w4.engine"))
    again = tfg.load(str(tmp_path / "w4.engine"), device="cpu")
    a, b = engine.run(dict(feeds)), again.run(dict(feeds))
    for k in a:
        np.testing.assert_array_equal(np.asarray(a[k]), np.asarray(b[k]))
    assert onnx is not None
