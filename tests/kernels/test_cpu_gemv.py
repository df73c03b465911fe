"""The M ≤ 8 GEMV MatMulEpilogue tactic on the CPU (kernels/cpu_gemv.py): against closed forms in float64 (every
activation it takes, residual before / after, trans_b, a scalar bias, no bias), the reasons it gives for layers it
refuses, and a timed CPU build of an ONNX squeeze-excite style head (M = 1 FCs) that matches onnxruntime."""

import io

import pytest
import torch

from oracle import assert_close, ort_run
from kernels.test_cpu_onednn import closed_form

import tensorforge as tfg
from tensorforge.ir import Layer
from tensorforge.kernels.cpu_gemv import CpuGemvMatMulEpilogue as Gemv

CPU = torch.device("cpu")
ACTS = [("none", 0.0, 0.0), ("Relu", 0.0, 0.0), ("Sigmoid", 0.0, 0.0), ("Tanh", 0.0, 0.0), ("HardSwish", 0.0, 0.0),
        ("Silu", 0.0, 0.0), ("LeakyRelu", 0.1, 0.0), ("Clip", -0.5, 0.7), ("HardSigmoid", 1 / 6, 0.5)]


def _layer(n_inputs, **attrs):
    return Layer("fc", "MatMulEpilogue", [f"i{k}" for k in range(n_inputs)], ["y"], attrs)


def _want(a, w, bias, act, alpha, beta, residual=None, before=False):
    y = a.double() @ w.double() + (bias.double() if bias is not None else 0)
    if residual is not None and before:
        y = y + residual.double()
    y = closed_form(act, alpha, beta, y)
    return y + residual.double() if residual is not None and not before else y


@pytest.mark.parametrize("act,alpha,beta", ACTS)
@pytest.mark.parametrize("residual", ["none", "after", "before"])
def test_matches_closed_form(act, alpha, beta, residual):
    g = torch.Generator().manual_seed(0)
    a, w, bias = torch.randn(1, 96, generator=g), torch.randn(96, 40, generator=g), torch.randn(40, generator=g)
    r = torch.randn(1, 40, generator=g) if residual != "none" else None
    ins = [a, w, bias] + ([r] if r is not None else [])
    layer = _layer(len(ins), activation=act, alpha=alpha, beta=beta, residual_first=int(residual == "before"))
    assert Gemv.supports(layer, CPU) is None and Gemv.fits(layer, {}, ins) is None
    got = Gemv.build(layer, {}, CPU)(ins)[0]
    want = _want(a, w, bias, act, alpha, beta, r, residual == "before")
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=2e-5)


def test_trans_b_rows_scalar_bias_and_no_bias():
    g = torch.Generator().manual_seed(1)
    a, w = torch.randn(2, 3, 8, generator=g), torch.randn(8, 6, generator=g)      # 6 rows, a 3-D x
    wt, one = w.t().contiguous(), torch.tensor([0.25])
    got = Gemv.build(_layer(3, activation="HardSwish", trans_b=1), {}, CPU)([a, wt, one])[0]
    assert got.shape == (2, 3, 6)
    torch.testing.assert_close(got.double(), closed_form("HardSwish", 0, 0, a.double() @ w.double() + 0.25),
                               rtol=1e-5, atol=2e-5)
    plain = Gemv.build(_layer(2), {}, CPU)([a[0, :1], w])[0]
    torch.testing.assert_close(plain.double(), a[0, :1].double() @ w.double(), rtol=1e-5, atol=2e-5)


def test_layers_it_refuses_say_why():
    sup, fits = Gemv.supports, Gemv.fits
    assert "CPU tactic" in sup(_layer(2), torch.device("meta"))
    half = _layer(2)
    half.precision = "float16"
    assert "float16" in sup(half, CPU)
    assert "scale" in sup(_layer(2, scale=0.5), CPU)
    assert "Gelu" in sup(_layer(2, activation="Gelu"), CPU)
    assert "hardsigmoid" in sup(_layer(2, activation="HardSigmoid", alpha=0.2, beta=0.5), CPU)
    assert "a GEMM, not a GEMV" in fits(_layer(2), {}, [torch.randn(32, 16), torch.randn(16, 8)])
    assert "batched" in fits(_layer(2), {}, [torch.randn(2, 1, 4), torch.randn(2, 4, 5)])
    assert "float32" in fits(_layer(2), {}, [torch.randn(1, 4).double(), torch.randn(4, 5).double()])
    assert "bias of 3 values" in fits(_layer(3), {}, [torch.randn(1, 4), torch.randn(4, 5), torch.randn(3)])
    assert "larger shape" in fits(_layer(4), {}, [torch.randn(1, 4), torch.randn(4, 5), None, torch.randn(3, 5)])
    with pytest.raises(ValueError, match="cpu_gemv got inputs"):
        Gemv.build(_layer(2), {}, CPU)([torch.randn(32, 16), torch.randn(16, 8)])


class _SEHead(torch.nn.Module):
    """pool → FC → ReLU → FC → HardSigmoid → scale, then FC → HardSwish → FC: MobileNetV3's M = 1 layers."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(64, 16), torch.nn.Linear(16, 64)
        self.fc3, self.fc4 = torch.nn.Linear(64, 96), torch.nn.Linear(96, 10)

    def forward(self, x):
        p = x.mean((2, 3))
        s = torch.nn.functional.hardsigmoid(self.fc2(torch.relu(self.fc1(p))))
        y = (x * s[:, :, None, None]).mean((2, 3))
        return self.fc4(torch.nn.functional.hardswish(self.fc3(y)))


def test_engine_running_it_matches_onnxruntime(tmp_path):
    """A timed CPU build, then every MatMulEpilogue layer set to this tactic (the engine is data; the context
    instantiates what it names): the engine's outputs against onnxruntime's."""
    from tensorforge.runtime import ExecutionContext
    torch.manual_seed(0)
    x = torch.randn(1, 64, 7, 7)
    buf = io.BytesIO()
    torch.onnx.export(_SEHead().eval(), (x,), buf, dynamo=False, opset_version=17, input_names=["x"],
                      output_names=["y"])
    eng = tfg.build(buf.getvalue(), device="cpu", timing_cache=str(tmp_path / "t.json"))
    mm = [layer for layer in eng.data.layers if layer.op == "MatMulEpilogue"]
    assert len(mm) >= 3, [layer.op for layer in eng.data.layers]
    assert {layer.attrs.get("activation") for layer in mm} >= {"Relu", "HardSigmoid", "HardSwish"}
    for layer in mm:
        layer.tactic = "matmulepilogue.cpu_gemv"
    ctx = ExecutionContext(eng.data, "cpu")
    got = ctx.run({"x": x})
    assert_close(got, ort_run(buf.getvalue(), {"x": x.numpy()}))
