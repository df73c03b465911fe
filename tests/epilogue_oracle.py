"""onnxruntime as the oracle of the fused kernels' epilogues: a product (Conv, or Transpose → MatMul → Mul scale)
→ [Add residual] → activation → [Add residual] in float32 on the given tensors' values, the unfused ONNX graph in
the epilogue order of ir/ops/fused.py (`epilogue_nodes` writes that chain)."""

import numpy as np
import onnx
import onnxruntime as ort
import torch
from onnx import TensorProto, helper

RTOL = {torch.float16: 2e-3}


def epilogue_nodes(y: str, act: str, residual: bool, residual_first: int, **act_attrs) -> list:
    """The nodes y → [Add(·, R)] → act → [Add(·, R)] → Identity → "Y" (act "none": no activation node)."""
    nodes = []
    if residual and residual_first:
        nodes.append(helper.make_node("Add", [y, "R"], ["e_res_first"]))
        y = "e_res_first"
    if act != "none":
        nodes.append(helper.make_node(act, [y], ["e_act"], **act_attrs))
        y = "e_act"
    if residual and not residual_first:
        nodes.append(helper.make_node("Add", [y, "R"], ["e_res"]))
        y = "e_res"
    return nodes + [helper.make_node("Identity", [y], ["Y"])]


def conv_epilogue_oracle(x, w, bias=None, residual=None, conv_attrs=None, act="none", residual_first=0,
                         gate=None) -> np.ndarray:
    """With `gate` (N or 1, C, 1, 1): Mul(X, G) feeds the Conv (a squeeze-excite gate), its product rounded to x's
    dtype first when x is half, as a half-precision Mul stores it."""
    f32 = lambda t: t.detach().to(torch.float32).numpy()
    feeds, ins, nodes = {"X": f32(x), "W": f32(w)}, ["X", "W"], []
    if gate is not None:
        feeds["G"] = f32(gate)
        nodes.append(helper.make_node("Mul", ["X", "G"], ["xg"]))
        if x.dtype == torch.float16:
            nodes += [helper.make_node("Cast", ["xg"], ["xg16"], to=TensorProto.FLOAT16),
                      helper.make_node("Cast", ["xg16"], ["xg32"], to=TensorProto.FLOAT)]
        ins[0] = "xg32" if x.dtype == torch.float16 else "xg"
    if bias is not None:
        feeds["B"] = f32(bias)
        ins.append("B")
    nodes.append(helper.make_node("Conv", ins, ["y0"], **{k: v for k, v in (conv_attrs or {}).items()
                                                           if v is not None}))
    if residual is not None:
        feeds["R"] = f32(residual)
    nodes += epilogue_nodes("y0", act, residual is not None, residual_first)
    inputs = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(v.shape)) for k, v in feeds.items()]
    graph = helper.make_graph(nodes, "conv_epilogue", inputs, [helper.make_tensor_value_info("Y", TensorProto.FLOAT,
                                                                                             None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(["Y"], feeds)[0].astype(np.float64)


def gemm_epilogue_oracle(a, w, bias=None, residual=None, trans_b=0, scale=1.0, act="none", residual_first=0):
    """onnxruntime on the unfused graph, float32 (the inputs' values exactly), as a float64 numpy array."""
    f32 = lambda t: t.detach().to(torch.float32).numpy()
    feeds, nodes, inputs = {"A": f32(a), "W": f32(w)}, [], []
    b_name = "W"
    if trans_b:
        nodes.append(helper.make_node("Transpose", ["W"], ["Wt"], perm=[1, 0]))
        b_name = "Wt"
    nodes.append(helper.make_node("MatMul", ["A", b_name], ["y0"]))
    y = "y0"
    inits = [helper.make_tensor("s", TensorProto.FLOAT, [], [scale])]
    nodes.append(helper.make_node("Mul", [y, "s"], ["y1"]))
    y = "y1"
    if bias is not None:
        feeds["bias"] = f32(bias)
        nodes.append(helper.make_node("Add", [y, "bias"], ["y2"]))
        y = "y2"
    if residual is not None:
        feeds["R"] = f32(residual)
    kw = {"approximate": "tanh"} if act == "GeluTanh" else {}
    nodes += epilogue_nodes(y, "Gelu" if act.startswith("Gelu") else act, residual is not None, residual_first, **kw)
    out_shape = [*feeds["A"].shape[:-1], w.shape[0] if trans_b else w.shape[1]]
    for name, arr in feeds.items():
        inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(arr.shape)))
    out = helper.make_tensor_value_info("Y", TensorProto.FLOAT, out_shape)
    graph = helper.make_graph(nodes, "unfused", inputs, [out], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9      # opset 20's IR; onnx 1.23 writes 14 by default, which onnxruntime 1.30 refuses
    onnx.checker.check_model(model)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(["Y"], feeds)[0].astype(np.float64)


def check_gemm(got, want, dtype=torch.float16):
    """|got − want| ≤ rtol·|want| + rtol·max|want| elementwise (float16: 2e-3 ≈ 4 half-ulps)."""
    g = got.detach().to(torch.float64).numpy()
    rtol = RTOL[dtype]
    err = np.abs(g - want)
    bound = rtol * np.abs(want) + rtol * np.abs(want).max()
    assert g.shape == want.shape, f"shape {g.shape} ≠ {want.shape}"
    assert (err <= bound).all(), (f"{int((err > bound).sum())} of {err.size} elements off; worst "
                                  f"{err.max():.4g} at {np.unravel_index(err.argmax(), err.shape)}")
