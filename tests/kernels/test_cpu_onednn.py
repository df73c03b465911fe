"""oneDNN linear tactics on the CPU (kernels/cpu_onednn.py).

Fused path against closed forms in float64 (act(a·W + bias) [+ residual], each activation written out here): every
activation with a post-op, residual after (and before, with no activation), trans_b, no bias; Gemm's β and C forms.
What oneDNN cannot fuse is not this tactic's: supports()/fits() give the reason, the kernel refuses such inputs,
and an engine built from ONNX records the tactic that does run them (torch_addmm, or the reference) — checked
against onnxruntime. Weight packing: once per weight tensor.
"""

import math

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from oracle import ort_run

import tensorforge as tfg
from tensorforge.ir import Layer
from tensorforge.kernels.cpu_onednn import OneDnnGemm, OneDnnMatMulEpilogue, onednn_reason

pytestmark = pytest.mark.skipif(onednn_reason(torch.device("cpu")) is not None, reason="torch without oneDNN")
CPU = torch.device("cpu")
FUSED_ACTS = [("none", 0.0, 0.0), ("Relu", 0.0, 0.0), ("Sigmoid", 0.0, 0.0), ("Tanh", 0.0, 0.0),
              ("HardSwish", 0.0, 0.0), ("Silu", 0.0, 0.0), ("Gelu", 0.0, 0.0), ("Gelu", 1.0, 0.0),
              ("LeakyRelu", 0.1, 0.0), ("Clip", -0.5, 0.7), ("HardSigmoid", 1 / 6, 0.5)]


def closed_form(act, alpha, beta, x):
    """The activation in float64, from its definition (ONNX operator spec)."""
    if act == "none":
        return x
    if act == "Relu":
        return x.clamp(min=0)
    if act == "Sigmoid":
        return 1 / (1 + torch.exp(-x))
    if act == "Tanh":
        return torch.tanh(x)
    if act == "HardSwish":
        return x * (x + 3).clamp(0, 6) / 6
    if act == "Silu":
        return x / (1 + torch.exp(-x))
    if act == "Gelu" and alpha == 1.0:         # tanh approximation
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    if act == "Gelu":
        return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))
    if act == "LeakyRelu":
        return torch.where(x >= 0, x, alpha * x)
    if act == "Clip":
        return x.clamp(alpha, beta)
    if act == "HardSigmoid":
        return (alpha * x + beta).clamp(0, 1)
    if act == "Elu":
        return torch.where(x >= 0, x, alpha * (torch.exp(x) - 1))
    raise AssertionError(act)


def _layer(n_inputs, **attrs):
    return Layer("mm", "MatMulEpilogue", [f"i{k}" for k in range(n_inputs)], ["y"], attrs)


@pytest.mark.parametrize("act,alpha,beta", FUSED_ACTS)
@pytest.mark.parametrize("residual", ["none", "after", "before"])
def test_matmul_epilogue_matches_closed_form(act, alpha, beta, residual):
    if residual == "before" and act != "none":
        pytest.skip("a residual before an activation is not this tactic's (test_rejected_layers_say_why)")
    g = torch.Generator().manual_seed(0)
    a, w, bias = torch.randn(2, 5, 16, generator=g), torch.randn(16, 12, generator=g), torch.randn(12, generator=g)
    ins = [a, w, bias] + ([torch.randn(2, 5, 12, generator=g)] if residual != "none" else [])
    layer = _layer(len(ins), activation=act, alpha=alpha, beta=beta, residual_first=int(residual == "before"))
    assert OneDnnMatMulEpilogue.supports(layer, CPU) is None and OneDnnMatMulEpilogue.fits(layer, {}, ins) is None
    got = OneDnnMatMulEpilogue.build(layer, {}, CPU)(ins)[0]
    y = a.double() @ w.double() + bias.double()
    if residual == "before":
        y = y + ins[3].double()
    y = closed_form(act, alpha, beta, y)
    if residual == "after":
        y = y + ins[3].double()
    torch.testing.assert_close(got.double(), y, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("case", ["trans_b", "no_bias"])
def test_matmul_epilogue_other_forms(case):
    g = torch.Generator().manual_seed(1)
    a, w, bias = torch.randn(3, 8, generator=g), torch.randn(8, 6, generator=g), torch.randn(6, generator=g)
    attrs = {"activation": "Relu"}
    ins = [a, w.t().contiguous(), bias] if case == "trans_b" else [a, w]
    if case == "trans_b":
        attrs["trans_b"] = 1
    got = OneDnnMatMulEpilogue.build(_layer(len(ins), **attrs), {}, CPU)(ins)[0]
    want = (a.double() @ w.double() + (bias.double() if case == "trans_b" else 0)).clamp(min=0)
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=2e-5)


def test_rejected_layers_say_why():
    sup, fits = OneDnnMatMulEpilogue.supports, OneDnnMatMulEpilogue.fits
    assert "scale" in sup(_layer(3, activation="Relu", scale=0.5), CPU)
    assert "post-op" in sup(_layer(3, activation="Elu", alpha=1.0), CPU)
    assert "post-op" in sup(_layer(3, activation="HardSigmoid", alpha=0.2, beta=0.5), CPU)
    assert "before the activation" in sup(_layer(4, activation="Relu", residual_first=1), CPU)
    half = _layer(3, activation="Relu")
    half.precision = "float16"
    assert "float16" in sup(half, CPU)
    assert "batched" in fits(_layer(2), {}, [torch.randn(2, 3, 8), torch.randn(2, 8, 6)])
    assert "float32 or bfloat16" in fits(_layer(2), {}, [torch.randn(3, 8).half(), torch.randn(8, 6).half()])
    assert "transA" in OneDnnGemm.supports(Layer("g", "Gemm", ["a", "b"], ["y"], {"transA": 1}), CPU)
    assert "C of 24 values" in OneDnnGemm.fits(Layer("g", "Gemm", ["a", "b", "c"], ["y"], {}), {},
                                               [torch.randn(4, 8), torch.randn(8, 6), torch.randn(4, 6)])
    assert "CPU tactic" in onednn_reason(torch.device("cuda"))


def test_kernel_refuses_inputs_it_does_not_take():
    run = OneDnnMatMulEpilogue.build(_layer(2), {}, CPU)
    with pytest.raises(ValueError, match="batched"):
        run([torch.randn(2, 3, 8), torch.randn(2, 8, 6)])


def _model(nodes, inputs, inits, opset=17):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model.SerializeToString()


def _cases():
    rng = np.random.default_rng(3)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    mm = helper.make_node
    return {
        # MatMul of two activations (3-D weight) + bias + Relu
        "batched_weight": (_model([mm("MatMul", ["x", "w"], ["t"]), mm("Add", ["t", "b"], ["u"]), mm("Relu", ["u"], ["y"])],
                                  [("x", [2, 3, 8]), ("w", [2, 8, 6])], {"b": r(6)}),
                           {"x": r(2, 3, 8), "w": r(2, 8, 6)}, "MatMulEpilogue"),
        # Gemm α = 0.5 then Relu: a MatMulEpilogue with scale 0.5
        "scale": (_model([mm("Gemm", ["x", "w", "b"], ["t"], alpha=0.5), mm("Relu", ["t"], ["y"])],
                         [("x", [4, 8])], {"w": r(8, 6), "b": r(6)}), {"x": r(4, 8)}, "MatMulEpilogue"),
        # the residual added before the ReLU
        "residual_before": (_model([mm("MatMul", ["x", "w"], ["t"]), mm("Add", ["t", "b"], ["u"]),
                                    mm("Add", ["u", "r"], ["v"]), mm("Relu", ["v"], ["y"])],
                                   [("x", [4, 8]), ("r", [4, 6])], {"w": r(8, 6), "b": r(6)}),
                            {"x": r(4, 8), "r": r(4, 6)}, "MatMulEpilogue"),
        # Gemm whose C is a full (M, N) matrix, not a bias
        "gemm_full_c": (_model([mm("Gemm", ["x", "w", "c"], ["y"])], [("x", [4, 8])], {"w": r(8, 6), "c": r(4, 6)}),
                        {"x": r(4, 8)}, "Gemm"),
    }


@pytest.mark.parametrize("case", ["batched_weight", "scale", "residual_before", "gemm_full_c"])
def test_engine_records_the_tactic_that_runs(case):
    """An engine with a layer oneDNN cannot take: the layer info names the tactic that runs it (not
    onednn_linear), and the output matches onnxruntime."""
    model, feeds, op = _cases()[case]
    engine = tfg.build(model, device="cpu")
    layers = [layer for layer in engine.data.layers if layer.op in ("MatMulEpilogue", "Gemm", "MatMul")]
    assert layers, [layer.op for layer in engine.data.layers]
    assert all("onednn_linear" not in layer.tactic for layer in layers), [(l.op, l.tactic) for l in layers]
    want = ort_run(model, feeds)
    np.testing.assert_allclose(engine.run(feeds)["y"], want["y"], rtol=1e-5, atol=1e-5)


def test_fp16_engine_does_not_use_onednn():
    """fp16 build on the CPU: the layer is float16, onednn_linear says so, and the output is within fp16 rounding
    of onnxruntime's fp32 result."""
    rng = np.random.default_rng(4)
    model = _model([helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["u"]),
                    helper.make_node("Relu", ["u"], ["y"])], [("x", [4, 8])],
                   {"w": rng.standard_normal((8, 6)).astype(np.float32), "b": rng.standard_normal(6).astype(np.float32)})
    engine = tfg.build(model, device="cpu", fp16=True)
    gemms = [layer for layer in engine.data.layers if layer.op in ("MatMulEpilogue", "Gemm", "MatMul")]
    assert gemms and all(layer.precision == "float16" and "onednn" not in layer.tactic for layer in gemms)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    got, want = engine.run({"x": x})["y"], ort_run(model, {"x": x})["y"]
    np.testing.assert_allclose(np.asarray(got, np.float32), want, rtol=1e-2, atol=1e-2)


def test_weight_is_packed_once_per_weight_tensor(monkeypatch):
    run = OneDnnMatMulEpilogue.build(_layer(2), {}, CPU)
    w, calls = torch.randn(8, 4), []
    real = torch.ops.mkldnn._reorder_linear_weight

    class Spy:
        def __call__(self, *args):
            calls.append(1)
            return real(*args)
    monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", Spy())
    for rows in (3, 5, 3):
        assert run([torch.randn(rows, 8), w])[0].shape == (rows, 4)
    run([torch.randn(2, 8), torch.randn(8, 4)])           # another weight: packed again
    assert len(calls) == 2


@pytest.mark.parametrize("c_shape,beta,trans_b", [((6,), 1.0, 0), ((1, 6), 0.5, 1), ((1,), 2.0, 0), (None, 1.0, 1)])
def test_gemm_matches_closed_form(c_shape, beta, trans_b):
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(4, 8, generator=g), torch.randn(6, 8, generator=g) if trans_b else torch.randn(8, 6, generator=g)
    ins = [a, b] + ([torch.randn(*c_shape, generator=g)] if c_shape else [])
    attrs = {"beta": beta, "transB": trans_b}
    layer = Layer("g", "Gemm", [f"i{k}" for k in range(len(ins))], ["y"], attrs)
    got = OneDnnGemm.build(layer, {}, CPU)(ins)[0]
    want = a.double() @ (b.double().t() if trans_b else b.double())
    if c_shape:
        want = want + beta * ins[2].double()
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=2e-5)
