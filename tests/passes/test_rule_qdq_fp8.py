"""FP8 E4M3 Q/DQ (opset 19+ QuantizeLinear/DequantizeLinear with float8e4m3fn zero points), built by hand:
MatMul and Conv with fp8 activations and weights fuse into one quantized op with an fp8 output, and match
onnxruntime's exact evaluation of the Q/DQ graph within one fp8 step (a float32 sum in another order)."""

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from fusion_helpers import build_logged, ops
from qdq_graphs import ort_exact

RNG = np.random.RandomState(3)
F8 = TensorProto.FLOAT8E4M3FN


def _f8(name, values):
    """A float8e4m3fn initializer (values rounded to the type by torch)."""
    t = torch.tensor(np.asarray(values, np.float32)).to(torch.float8_e4m3fn)
    return helper.make_tensor(name, F8, list(t.shape), t.view(torch.uint8).flatten().tolist(), raw=False), t


def _model(core="MatMul", opset=21):
    inits, nodes = [], []

    def const(name, v):
        inits.append(numpy_helper.from_array(np.asarray(v), name))
        return name
    zp, _ = _f8("zp", 0.0)
    inits.append(zp)
    if core == "MatMul":
        x_shape, w_val = [4, 6, 32], RNG.randn(32, 16) * 0.5
        w_axis = 1
    else:
        x_shape, w_val = [2, 8, 6, 6], RNG.randn(16, 8, 3, 3) * 0.5
        w_axis = 0
    wt, _ = _f8("w8", w_val)
    inits.append(wt)
    ws = (0.05 * (1 + np.arange(w_val.shape[w_axis]) / 16)).astype(np.float32)
    wzp, _ = _f8("wzp", np.zeros(w_val.shape[w_axis]))
    inits.append(wzp)
    nodes += [helper.make_node("QuantizeLinear", ["x", const("xs", np.float32(0.02)), "zp"], ["xq"]),
              helper.make_node("DequantizeLinear", ["xq", "xs", "zp"], ["xd"]),
              helper.make_node("DequantizeLinear", ["w8", const("ws", ws), "wzp"], ["wd"], axis=w_axis)]
    if core == "MatMul":
        nodes.append(helper.make_node("MatMul", ["xd", "wd"], ["y"]))
    else:
        nodes.append(helper.make_node("Conv", ["xd", "wd", const("b", RNG.randn(16).astype(np.float32))], ["y"],
                                      pads=[1, 1, 1, 1]))
    nodes += [helper.make_node("Relu", ["y"], ["yr"]),
              helper.make_node("QuantizeLinear", ["yr", const("ys", np.float32(0.01)), "zp"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "ys", "zp"], ["out"])]
    g = helper.make_graph(nodes, "fp8", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m.SerializeToString(), x_shape


def _fp8_steps(got, want):
    """|got − want| in float8 E4M3 steps of the exact value's binade (the output is DQ(fp8) = fp8 · 0.01)."""
    w = np.abs(want) / 0.01
    e = np.floor(np.log2(np.maximum(w, 2.0 ** -6)))
    return np.abs(got - want) / 0.01 / 2.0 ** (e - 3)


@pytest.mark.parametrize("core,opset", [("MatMul", 21), ("Conv", 19)])
def test_fp8_qdq_fuses_and_matches_exact(core, opset):
    model, shape = _model(core, opset)
    feeds = {"x": (RNG.randn(*shape) * 2).astype(np.float32)}
    engine, _ = build_logged(model)
    fused = "QuantizedMatMul" if core == "MatMul" else "QuantizedConv"
    assert ops(engine).count(fused) == 1 and core not in ops(engine)
    layer = next(x for x in engine.data.layers if x.op == fused)
    assert layer.attrs["x_dtype"] == "float8_e4m3fn" and layer.attrs["y_dtype"] == "float8_e4m3fn"
    assert engine.data.constants[layer.inputs[1]].dtype == torch.float8_e4m3fn
    got, want = engine.run(dict(feeds))["out"], ort_exact(model, feeds)["out"]
    steps = _fp8_steps(np.asarray(got, np.float64), want.astype(np.float64))
    assert steps.max() <= 1 + 1e-6 and (steps == 0).mean() > 0.98


def test_fp8_activations_with_int8_weights_are_not_fused():
    model, shape = _model("MatMul", 21)
    m = onnx.load_from_string(model)
    w = next(i for i in m.graph.initializer if i.name == "w8")
    vals = np.clip(np.round(RNG.randn(32, 16) * 30), -127, 127).astype(np.int8)
    w.CopyFrom(numpy_helper.from_array(vals, "w8"))
    wzp = next(i for i in m.graph.initializer if i.name == "wzp")
    wzp.CopyFrom(numpy_helper.from_array(np.zeros(16, np.int8), "wzp"))
    model = m.SerializeToString()
    engine, log = build_logged(model)
    assert "QuantizedMatMul" not in ops(engine)
    assert "one kernel takes both int8 or both fp8" in log
