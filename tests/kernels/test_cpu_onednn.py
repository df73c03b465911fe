"""oneDNN linear tactics on the CPU (kernels/cpu_onednn.py) against the MatMulEpilogue / Gemm references: every
activation with a post-op, residual before/after, trans_b, the cases that run the op's torch path (3-D weight,
scale, residual before an activation, Elu, float16), weight packing kept per context, and Gemm's β and C forms."""

import pytest
import torch

from tensorforge.ir import Layer, get_spec
from tensorforge.kernels.cpu_onednn import OneDnnGemm, OneDnnMatMulEpilogue, onednn_reason

pytestmark = pytest.mark.skipif(onednn_reason(torch.device("cpu")) is not None, reason="torch without oneDNN")
CPU = torch.device("cpu")
ACTS = [("none", 0.0, 0.0), ("Relu", 0.0, 0.0), ("Sigmoid", 0.0, 0.0), ("Tanh", 0.0, 0.0), ("HardSwish", 0.0, 0.0),
        ("Silu", 0.0, 0.0), ("Gelu", 0.0, 0.0), ("Gelu", 1.0, 0.0), ("LeakyRelu", 0.1, 0.0), ("Clip", -0.5, 0.7),
        ("HardSigmoid", 1 / 6, 0.5), ("HardSigmoid", 0.2, 0.5), ("Elu", 1.0, 0.0)]


def _run(inputs, **attrs):
    layer = Layer("mm", "MatMulEpilogue", [f"i{k}" for k in range(len(inputs))], ["y"], attrs)
    got = OneDnnMatMulEpilogue.build(layer, {}, CPU)(inputs)[0]
    want = get_spec("MatMulEpilogue").reference(*inputs, **attrs)
    return got, want


@pytest.mark.parametrize("act,alpha,beta", ACTS)
@pytest.mark.parametrize("residual", ["none", "after", "before"])
def test_matmul_epilogue_matches_reference(act, alpha, beta, residual):
    torch.manual_seed(0)
    ins = [torch.randn(2, 5, 16), torch.randn(16, 12), torch.randn(12)]
    if residual != "none":
        ins.append(torch.randn(2, 5, 12))
    got, want = _run(ins, activation=act, alpha=alpha, beta=beta, residual_first=int(residual == "before"))
    torch.testing.assert_close(got, want, rtol=1e-5, atol=2e-5)


@pytest.mark.parametrize("case", ["trans_b", "batched_weight", "scale", "half", "no_bias"])
def test_matmul_epilogue_other_forms(case):
    torch.manual_seed(1)
    a, w, bias, attrs = torch.randn(3, 8), torch.randn(8, 6), torch.randn(6), {"activation": "Relu"}
    if case == "trans_b":
        w, attrs = w.t().contiguous(), {**attrs, "trans_b": 1}
    elif case == "batched_weight":
        a, w = torch.randn(2, 3, 8), torch.randn(2, 8, 6)
    elif case == "scale":
        attrs = {**attrs, "scale": 0.5}
    elif case == "half":
        a, w, bias = a.half(), w.half(), bias.half()
    ins = [a, w] if case == "no_bias" else [a, w, bias]
    got, want = _run(ins, **attrs)
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)


def test_weight_is_packed_once_per_weight_tensor():
    layer = Layer("mm", "MatMulEpilogue", ["a", "w"], ["y"], {})
    run = OneDnnMatMulEpilogue.build(layer, {}, CPU)
    w = torch.randn(8, 4)
    calls = []
    real = torch.ops.mkldnn._reorder_linear_weight

    class Spy:
        def __call__(self, *args):
            calls.append(1)
            return real(*args)
    import tensorforge.kernels.cpu_onednn as mod
    old = mod.torch.ops.mkldnn._reorder_linear_weight
    try:
        torch.ops.mkldnn._reorder_linear_weight = Spy()
        for rows in (3, 5, 3):
            torch.testing.assert_close(run([torch.randn(rows, 8), w])[0].shape, torch.Size([rows, 4]))
        run([torch.randn(2, 8), torch.randn(8, 4)])           # another weight: packed again
    finally:
        torch.ops.mkldnn._reorder_linear_weight = old
    assert len(calls) == 2


@pytest.mark.parametrize("c_shape,beta,trans_b", [((6,), 1.0, 0), ((1, 6), 0.5, 1), ((4, 6), 1.0, 0), (None, 1.0, 1)])
def test_gemm_matches_reference(c_shape, beta, trans_b):
    torch.manual_seed(2)
    a, b = torch.randn(4, 8), torch.randn(6, 8) if trans_b else torch.randn(8, 6)
    ins = [a, b] + ([torch.randn(*c_shape)] if c_shape else [])
    attrs = {"beta": beta, "transB": trans_b}
    layer = Layer("g", "Gemm", [f"i{k}" for k in range(len(ins))], ["y"], attrs)
    got = OneDnnGemm.build(layer, {}, CPU)(ins)[0]
    torch.testing.assert_close(got, get_spec("Gemm").reference(*ins, **attrs), rtol=1e-5, atol=2e-5)


def test_reasons():
    assert "CPU tactic" in onednn_reason(torch.device("cuda"))
    gemm = Layer("g", "Gemm", ["a", "b"], ["y"], {"transA": 1})
    assert "transA" in OneDnnGemm.supports(gemm, CPU)
