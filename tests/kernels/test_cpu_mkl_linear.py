"""MKL packed-sgemm MatMulEpilogue and Gemm on the CPU (kernels/cpu_mkl_linear.py), against closed forms in float64
(act(a·W + bias) [+ residual], the activations written out in test_cpu_onednn.closed_form), a changed row count
(a second packing), the reasons it gives for layers it does not take, and a timed CPU build of an ONNX MLP that
times it against oneDNN's linear and matches onnxruntime."""

import io
import json

import pytest
import torch

from oracle import assert_close, ort_run
from kernels.test_cpu_onednn import FUSED_ACTS, closed_form

import tensorforge as tfg
from tensorforge.ir import Layer
from tensorforge.kernels.cpu_mkl_linear import MklGemm, MklMatMulEpilogue, mkl_reason

pytestmark = pytest.mark.skipif(mkl_reason(torch.device("cpu")) is not None, reason="torch without MKL")
CPU = torch.device("cpu")


def _layer(n_inputs, **attrs):
    return Layer("mm", "MatMulEpilogue", [f"i{k}" for k in range(n_inputs)], ["y"], attrs)


def _want(a, w, bias, act, alpha, beta, residual=None, before=False):
    y = a.double() @ w.double() + (bias.double() if bias is not None else 0)
    if residual is not None and before:
        y = y + residual.double()
    y = closed_form(act, alpha, beta, y)
    return y + residual.double() if residual is not None and not before else y


@pytest.mark.parametrize("act,alpha,beta", FUSED_ACTS)
@pytest.mark.parametrize("residual", ["none", "after", "before"])
def test_matches_closed_form(act, alpha, beta, residual):
    g = torch.Generator().manual_seed(0)
    a, w, bias = torch.randn(2, 5, 16, generator=g), torch.randn(16, 12, generator=g), torch.randn(12, generator=g)
    r = torch.randn(2, 5, 12, generator=g) if residual != "none" else None
    ins = [a, w, bias] + ([r] if r is not None else [])
    layer = _layer(len(ins), activation=act, alpha=alpha, beta=beta, residual_first=int(residual == "before"))
    assert MklMatMulEpilogue.supports(layer, CPU) is None and MklMatMulEpilogue.fits(layer, {}, ins) is None
    got = MklMatMulEpilogue.build(layer, {}, CPU)(ins)[0]
    want = _want(a, w, bias, act, alpha, beta, r, residual == "before")
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=2e-5)
    if act == "Relu" and residual == "after":        # the tolerance sees a 1 % error in one term
        with pytest.raises(AssertionError):
            torch.testing.assert_close(got.double(), _want(a, w, bias * 1.01, act, alpha, beta, r), rtol=1e-5,
                                       atol=2e-5)


def test_trans_b_scalar_bias_no_bias_and_a_new_row_count():
    g = torch.Generator().manual_seed(1)
    a, w = torch.randn(7, 8, generator=g), torch.randn(8, 6, generator=g)
    run = MklMatMulEpilogue.build(_layer(3, activation="Relu", trans_b=1), {}, CPU)
    wt, one = w.t().contiguous(), torch.tensor([0.25])
    torch.testing.assert_close(run([a, wt, one])[0].double(), (a.double() @ w.double() + 0.25).clamp(min=0),
                               rtol=1e-5, atol=2e-5)
    a3 = torch.randn(3, 8, generator=g)          # another M: packed again for 3 rows, same weight
    torch.testing.assert_close(run([a3, wt, one])[0].double(), (a3.double() @ w.double() + 0.25).clamp(min=0),
                               rtol=1e-5, atol=2e-5)
    plain = MklMatMulEpilogue.build(_layer(2), {}, CPU)([a, w])[0]
    torch.testing.assert_close(plain.double(), a.double() @ w.double(), rtol=1e-5, atol=2e-5)


def test_layers_it_does_not_take_say_why():
    sup, fits = MklMatMulEpilogue.supports, MklMatMulEpilogue.fits
    assert "CPU tactic" in sup(_layer(2), torch.device("meta"))
    half = _layer(2)
    half.precision = "float16"
    assert "float16" in sup(half, CPU)
    assert "scale" in sup(_layer(2, scale=0.5), CPU)
    assert "batched" in fits(_layer(2), {}, [torch.randn(2, 3, 4), torch.randn(2, 4, 5)])
    assert "float32" in fits(_layer(2), {}, [torch.randn(3, 4).double(), torch.randn(4, 5).double()])
    assert "bias of 3 values" in fits(_layer(3), {}, [torch.randn(3, 4), torch.randn(4, 5), torch.randn(3)])
    with pytest.raises(ValueError, match="mkl_packed got inputs"):
        MklMatMulEpilogue.build(_layer(2), {}, CPU)([torch.randn(3, 4).double(), torch.randn(4, 5).double()])


def _mlp() -> tuple[bytes, dict]:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 32)).eval()
    x = torch.randn(16, 64)
    buf = io.BytesIO()
    torch.onnx.export(net, (x,), buf, dynamo=False, opset_version=17, input_names=["input"])
    return buf.getvalue(), {"input": x.numpy()}


def test_timed_cpu_build_times_it_against_onednn_and_matches_onnxruntime(tmp_path):
    model, feeds = _mlp()
    cache = tmp_path / "timing.json"
    engine = tfg.build(model, device="cpu", timing_cache=str(cache))
    entries = [e for dev in json.loads(cache.read_text())["devices"].values() for e in dev.values()]
    timed = [e for e in entries if e["op"] == "MatMulEpilogue"]
    assert timed and all("matmulepilogue.mkl_packed" in e["times_ms"] for e in timed), timed
    assert_close(engine.run(dict(feeds)), ort_run(model, feeds))


@pytest.mark.parametrize("c_shape,beta,trans_b", [((6,), 1.0, 0), ((1, 6), 0.5, 1), ((1,), 2.0, 0), (None, 1.0, 1)])
def test_gemm_matches_closed_form(c_shape, beta, trans_b):
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(4, 8, generator=g), torch.randn(6, 8, generator=g) if trans_b else torch.randn(8, 6, generator=g)
    ins = [a, b] + ([torch.randn(*c_shape, generator=g)] if c_shape else [])
    layer = Layer("g", "Gemm", [f"i{k}" for k in range(len(ins))], ["y"], {"beta": beta, "transB": trans_b})
    assert MklGemm.supports(layer, CPU) is None and MklGemm.fits(layer, {}, ins) is None
    got = MklGemm.build(layer, {}, CPU)(ins)[0]
    want = a.double() @ (b.double().t() if trans_b else b.double())
    if c_shape:
        torch.testing.assert_close(got.double(), want + beta * ins[2].double(), rtol=1e-5, atol=2e-5)
        with pytest.raises(AssertionError):          # β applied once too often would be seen
            torch.testing.assert_close(got.double(), want + beta * 1.01 * ins[2].double(), rtol=1e-5, atol=2e-5)
    else:
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=2e-5)


def test_gemm_forms_it_does_not_take_say_why():
    g = lambda **a: Layer("g", "Gemm", ["a", "b", "c"], ["y"], a)          # noqa: E731
    assert "transA" in MklGemm.supports(g(transA=1), CPU)
    assert "α" in MklGemm.supports(g(alpha=2.0), CPU)
    assert "C of 3 values" in MklGemm.fits(g(), {}, [torch.randn(2, 4), torch.randn(4, 5), torch.randn(3)])
    assert "3-D A" in MklGemm.fits(g(), {}, [torch.randn(2, 2, 4), torch.randn(4, 5), torch.randn(5)])
