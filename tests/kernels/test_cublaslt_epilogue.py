"""The cuBLASLt activation-epilogue MatMulEpilogue tactic (kernels/cublaslt_epilogue.py).

On the CPU: engines built from unfused ONNX graphs (MatMul/Gemm → Add(bias) → Relu / Gelu-tanh), their
MatMulEpilogue layer set to this tactic and run by the runtime, against onnxruntime on the unfused graph; the
reasons it gives for layers and inputs it refuses; checks that can fail (use_gelu swapped); and what
torch._addmm_activation computes on the CPU, against closed forms in numpy. On CUDA (skipped without a GPU): the
real cuBLASLt path against the tanh closed form and the op's reference.
"""

import math

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from oracle import assert_close, ort_run

import tensorforge as tfg
from tensorforge.ir import Layer, get_spec
from tensorforge.kernels import candidates, cublaslt_epilogue
from tensorforge.kernels.cublaslt_epilogue import CublasLtActEpilogue as Lt
from tensorforge.kernels.registry import _TACTICS

CPU, CUDA = torch.device("cpu"), torch.device("cuda")
TID = "matmulepilogue.cublaslt_act"
HAS_CUDA = torch.cuda.is_available()


def _layer(n_inputs, **attrs):
    return Layer("fc", "MatMulEpilogue", [f"i{k}" for k in range(n_inputs)], ["y"], attrs)


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _gelu_erf(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _model(act: str, a_shape, k: int, n: int, gemm: bool, bias: bool = True) -> bytes:
    """x @ W (+ bias) → act, unfused. gemm: Gemm(transB=1) with W stored (N, K) and C = bias; act "Relu" or
    "Gelu" (opset 20's Gelu(approximate="tanh")); bias=False: no bias at all (Gemm without C, MatMul alone)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((n, k) if gemm else (k, n)).astype(np.float32)
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "B")]
    if not bias:
        inits = inits[:1]
        nodes = [helper.make_node("Gemm", ["x", "W"], ["z"], transB=1) if gemm else
                 helper.make_node("MatMul", ["x", "W"], ["z"])]
    elif gemm:
        nodes = [helper.make_node("Gemm", ["x", "W", "B"], ["z"], transB=1)]
    else:
        nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]), helper.make_node("Add", ["m", "B"], ["z"])]
    extra = {"approximate": "tanh"} if act == "Gelu" else {}
    nodes.append(helper.make_node(act, ["z"], ["y"], **extra))
    graph = helper.make_graph(nodes, "fc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(a_shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    return model.SerializeToString()


def _the_tactic():
    return next(t for t in _TACTICS["MatMulEpilogue"] if t.name == "cublaslt_act")


def _engine_run(model: bytes, x: torch.Tensor, monkeypatch):
    """Build on the CPU, set the one MatMulEpilogue layer to this tactic (the engine is data: the context
    instantiates what it names) and run it. supports() is judged as on the CUDA device the tactic targets, so
    the runtime builds it here instead of substituting the reference."""
    from tensorforge.runtime import ExecutionContext
    eng = tfg.build(model, device="cpu")
    mm = [layer for layer in eng.data.layers if layer.op == "MatMulEpilogue"]
    assert len(mm) == 1, [layer.op for layer in eng.data.layers]
    layer = mm[0]
    layer.tactic = TID
    tac = _the_tactic()
    real = tac.supports
    monkeypatch.setattr(tac, "supports", lambda lay, device: real(lay, CUDA))
    assert tac.supports(layer, CPU) is None
    ins = [x] + [eng.data.constants[i] for i in layer.inputs[1:]]
    assert Lt.fits(layer, {}, ins) is None
    ctx = ExecutionContext(eng.data, "cpu")
    assert ctx.substituted == {}, ctx.substituted
    return layer, ctx.run({"x": x})


CASES = [("Relu", (2, 5, 16), False), ("Relu", (7, 16), True), ("Gelu", (2, 5, 16), False), ("Gelu", (7, 16), True)]
NO_BIAS = [("Relu", (2, 5, 16), False), ("Gelu", (2, 5, 16), False), ("Gelu", (7, 16), True)]


@pytest.mark.parametrize("act,a_shape,gemm,bias", [c + (True,) for c in CASES] + [c + (False,) for c in NO_BIAS])
def test_engine_matches_onnxruntime(act, a_shape, gemm, bias, monkeypatch):
    """fp32, tight tolerance: the tanh and erf GELUs differ by up to ~5e-4 here, far outside it. Bias-free layers
    (GPT-2's FC1 as the dynamo exporter writes it) run with the stand-in zero bias."""
    model = _model(act, a_shape, 16, 12, gemm, bias)
    x = torch.randn(*a_shape, generator=torch.Generator().manual_seed(1))
    layer, got = _engine_run(model, x, monkeypatch)
    assert layer.attrs["activation"] == act and int(layer.attrs.get("trans_b", 0)) == int(gemm)
    assert (len(layer.inputs) > 2 and bool(layer.inputs[2])) == bias
    if act == "Gelu":
        assert layer.attrs["alpha"] == 1.0
    assert_close(got, ort_run(model, {"x": x.numpy()}), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("act", ["Relu", "Gelu"])
def test_swapped_epilogue_fails_the_comparison(act, monkeypatch):
    """Break on purpose: use_gelu swapped (the Gelu layer runs cuBLASLt's ReLU, the Relu layer a GELU) must fail
    the same check that passes above."""
    monkeypatch.setattr(cublaslt_epilogue, "USE_GELU", {"Relu": True, "Gelu": False})
    model = _model(act, (2, 5, 16), 16, 12, False)
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(1))
    _, got = _engine_run(model, x, monkeypatch)
    with pytest.raises(AssertionError):
        assert_close(got, ort_run(model, {"x": x.numpy()}), rtol=1e-5, atol=1e-5)


def test_a_nonzero_stand_in_bias_fails_the_comparison(monkeypatch):
    """Break on purpose: the bias-free layer's stand-in made of ones instead of zeros must fail the same check."""
    monkeypatch.setattr(cublaslt_epilogue, "stand_in_bias", lambda n, dtype, device: torch.ones(n, dtype=dtype))
    model = _model("Gelu", (2, 5, 16), 16, 12, False, bias=False)
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(1))
    _, got = _engine_run(model, x, monkeypatch)
    with pytest.raises(AssertionError):
        assert_close(got, ort_run(model, {"x": x.numpy()}), rtol=1e-5, atol=1e-5)


def test_transposed_activation_is_multiplied_in_memory_order():
    """A (S, B, K) view of a dense (B, S, K) tensor (rows_in_memory_order): no copy of A, y the same permutation."""
    g = torch.Generator().manual_seed(2)
    a = torch.randn(2, 5, 8, generator=g).transpose(0, 1)
    w, bias = torch.randn(8, 6, generator=g), torch.randn(6, generator=g)
    layer = _layer(3, activation="Relu")
    y = Lt.build(layer, {}, CPU)([a, w, bias])[0]
    torch.testing.assert_close(y, get_spec("MatMulEpilogue").reference(a, w, bias, activation="Relu"))
    assert y.shape == (5, 2, 6) and y.transpose(0, 1).is_contiguous()


def test_layers_it_refuses_say_why():
    sup = Lt.supports
    assert sup(_layer(3, activation="Relu"), CUDA) is None
    assert sup(_layer(3, activation="Gelu", alpha=1.0), CUDA) is None
    assert "CUDA" in sup(_layer(3, activation="Relu"), CPU)
    assert "erf form" in sup(_layer(3, activation="Gelu", alpha=0.0), CUDA)
    assert "erf form" in sup(_layer(3, activation="Gelu"), CUDA)                     # alpha's default is 0
    assert sup(_layer(2, activation="Relu"), CUDA) is None                           # no bias: zeros stand in
    no_bias = Layer("fc", "MatMulEpilogue", ["a", "b", "", "r"], ["y"], {"activation": "Relu"})
    assert "residual" in sup(no_bias, CUDA)
    assert "residual" in sup(_layer(4, activation="Relu", residual_first=1), CUDA)
    assert "scale" in sup(_layer(3, activation="Relu", scale=0.5), CUDA)
    assert "ReLU and tanh-GELU only" in sup(_layer(3, activation="Sigmoid"), CUDA)
    assert "ReLU and tanh-GELU only" in sup(_layer(3), CUDA)                         # no activation at all
    assert "not handled" in sup(_layer(3, activation="Relu", transA=1), CUDA)


def test_inputs_it_refuses_say_why():
    fits, relu = Lt.fits, _layer(3, activation="Relu")
    a, w, b = torch.randn(4, 8), torch.randn(8, 6), torch.randn(6)
    assert fits(relu, {}, [a, w, b]) is None
    assert fits(_layer(3, activation="Relu", trans_b=1), {}, [a, w.t().contiguous(), b]) is None
    assert "3-D" in fits(relu, {}, [torch.randn(2, 4, 8), torch.randn(2, 8, 6), b])
    assert "not one per column (6)" in fits(relu, {}, [a, w, torch.randn(5)])
    assert fits(relu, {}, [a, w, torch.randn(1, 6)]) is None                           # (1, N) reshapes to (N,)
    assert fits(_layer(2, activation="Relu"), {}, [a, w]) is None                      # no bias
    assert "float16" in fits(relu, {}, [a.double(), w.double(), b.double()])
    assert "both alike" in fits(relu, {}, [a.half(), w, b])
    assert "residual" in fits(_layer(4, activation="Relu"), {}, [a, w, b, torch.randn(4, 6)])


def test_untimed_choice_unchanged_on_both_devices():
    """CPU: refused, with its reason; the first candidate (what an untimed CPU build runs) is not this tactic.
    CUDA: a candidate below torch_addmm, so level-0 (untimed) builds keep torch_addmm; timed builds measure it."""
    layer = _layer(3, activation="Gelu", alpha=1.0)
    found, reasons = candidates(layer, CPU)
    assert "cublaslt_act" in reasons and all(t.name != "cublaslt_act" for t, _ in found)
    found, _ = candidates(layer, CUDA)
    names = [t.name for t, _ in found]
    assert names[0] == "torch_addmm" and names.index("cublaslt_act") == 1


def test_cpu_addmm_activation_against_closed_forms():
    """What torch._addmm_activation computes on the CPU, in float64 against numpy closed forms: ReLU, and for
    use_gelu=True the erf GELU — not the tanh form cuBLASLt computes (why supports() refuses the CPU and the
    CPU build of the kernel runs the tanh GELU itself)."""
    g = torch.Generator().manual_seed(3)
    a, w, b = (torch.randn(*s, generator=g, dtype=torch.float64) for s in ((9, 16), (16, 11), (11,)))
    x = a.numpy() @ w.numpy() + b.numpy()
    np.testing.assert_allclose(torch._addmm_activation(b, a, w).numpy(), np.maximum(x, 0), rtol=1e-12, atol=1e-12)
    gelu = torch._addmm_activation(b, a, w, use_gelu=True).numpy()
    np.testing.assert_allclose(gelu, _gelu_erf(x), rtol=1e-12, atol=1e-12)
    assert np.abs(gelu - _gelu_tanh(x)).max() > 1e-4
    # the oracle itself: the numpy tanh form is torch's gelu(approximate="tanh")
    np.testing.assert_allclose(_gelu_tanh(x), torch.nn.functional.gelu(torch.from_numpy(x), approximate="tanh"),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cuda_gelu_epilogue_is_the_tanh_form(dtype):
    """On CUDA _addmm_activation(use_gelu=True) is the tanh GELU (cuBLASLt's GELU_BIAS epilogue for these shapes)."""
    g = torch.Generator().manual_seed(4)
    a, w, b = (torch.randn(*s, generator=g, dtype=torch.float64) for s in ((64, 96), (96, 80), (80,)))
    x = a.numpy() @ w.numpy() + b.numpy()
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        got = torch._addmm_activation(*(t.to(CUDA, dtype) for t in (b, a, w)), use_gelu=True).double().cpu().numpy()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    want = _gelu_tanh((a.to(dtype).double().numpy() @ w.to(dtype).double().numpy()) + b.to(dtype).double().numpy())
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    if dtype == torch.float32:
        assert np.abs(got - _gelu_erf(x)).max() > 1e-4


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA device")
@pytest.mark.parametrize("act,alpha", [("Relu", 0.0), ("Gelu", 1.0)])
@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("with_bias", [True, False])
def test_cuda_tactic_matches_the_reference(act, alpha, trans_b, with_bias):
    """fp16, a GPT-2 FC1-like shape: max error against the float64 reference no larger than torch_addmm's + one
    fp16 step (one rounding instead of two); with_bias=False: the stand-in zero bias."""
    from tensorforge.kernels.torch_fused import TorchMatMulEpilogue
    g = torch.Generator().manual_seed(5)
    a, w = torch.randn(2, 64, 256, generator=g), torch.randn(256, 512, generator=g) / 16
    b = torch.randn(512, generator=g)
    w = w.t().contiguous() if trans_b else w
    layer = _layer(3 if with_bias else 2, activation=act, alpha=alpha, trans_b=trans_b)
    assert Lt.supports(layer, CUDA) is None
    ins = [t.to(CUDA, torch.float16) for t in ((a, w, b) if with_bias else (a, w))]
    assert Lt.fits(layer, {}, ins) is None
    want = get_spec("MatMulEpilogue").reference(*(t.double() for t in ins), activation=act, alpha=alpha,
                                                trans_b=trans_b)
    got = Lt.build(layer, {}, CUDA)(ins)[0]
    base = TorchMatMulEpilogue.build(layer, {}, CUDA)(ins)[0]
    assert got.dtype == torch.float16 and got.shape == (2, 64, 512)
    err, err_base = (float((t.double() - want).abs().max()) for t in (got, base))
    assert err <= err_base + float(want.abs().max()) * 2 ** -10, (err, err_base)
