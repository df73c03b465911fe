"""cpu_dnnl for MatMulEpilogue and Gemm: oneDNN matmul primitives made once per row count through its C library
(issue 18), against closed forms in float64 (every activation it takes, the residual before / after, trans_b,
a scalar bias, no bias, 3-D x) and against onnxruntime on a timed CPU build of an MLP; the refusals; one primitive
per row count and the weight packed once; a model-level check that fails on a 1 % weight error."""

import numpy as np
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

import tensorforge as tfg
from oracle import ort_run
from kernels.test_cpu_gemv import _want
from tensorforge.engine import from_bytes
from tensorforge.ir import Layer
from tensorforge.kernels import cpu_dnnl_matmul as dm
from tensorforge.kernels import onednn_capi
from tensorforge.runtime import ExecutionContext

CPU = torch.device("cpu")
pytestmark = pytest.mark.skipif(onednn_capi.library() is None, reason=str(onednn_capi.unavailable_reason()))
ACTS = [("none", 0.0, 0.0), ("Relu", 0.0, 0.0), ("Sigmoid", 0.0, 0.0), ("Tanh", 0.0, 0.0), ("HardSwish", 0.0, 0.0),
        ("Silu", 0.0, 0.0), ("LeakyRelu", 0.1, 0.0), ("Clip", -0.5, 0.7), ("HardSigmoid", 0.2, 0.5),
        ("Gelu", 0.0, 0.0), ("Gelu", 1.0, 0.0), ("Elu", 0.7, 0.0)]


def _layer(op, n_inputs, **attrs):
    return Layer("fc", op, [f"i{k}" for k in range(n_inputs)], ["y"], attrs)


@pytest.mark.parametrize("act,alpha,beta", ACTS)
@pytest.mark.parametrize("residual", ["none", "after", "before"])
@pytest.mark.parametrize("rows", [1, 37])
def test_matches_closed_form(act, alpha, beta, residual, rows):
    g = torch.Generator().manual_seed(0)
    a, w, bias = torch.randn(rows, 96, generator=g), torch.randn(96, 40, generator=g), torch.randn(40, generator=g)
    r = torch.randn(rows, 40, generator=g) if residual != "none" else None
    ins = [a, w, bias] + ([r] if r is not None else [])
    layer = _layer("MatMulEpilogue", len(ins), activation=act, alpha=alpha, beta=beta,
                   residual_first=int(residual == "before"))
    assert dm.DnnlMatMulEpilogue.supports(layer, CPU) is None and dm.DnnlMatMulEpilogue.fits(layer, {}, ins) is None
    got = dm.DnnlMatMulEpilogue.build(layer, {}, CPU)(ins)[0]
    torch.testing.assert_close(got.double(), _want(a, w, bias, act, alpha, beta, r, residual == "before"),
                               rtol=1e-5, atol=2e-5)


def test_trans_b_3d_x_scalar_bias_no_bias_and_gemm():
    g = torch.Generator().manual_seed(1)
    a, w = torch.randn(2, 3, 8, generator=g), torch.randn(8, 6, generator=g)
    wt, one = w.t().contiguous(), torch.tensor([0.25])
    got = dm.DnnlMatMulEpilogue.build(_layer("MatMulEpilogue", 3, activation="Relu", trans_b=1), {}, CPU)([a, wt, one])[0]
    assert got.shape == (2, 3, 6)
    torch.testing.assert_close(got.double(), (a.double() @ w.double() + 0.25).relu(), rtol=1e-5, atol=2e-5)
    plain = dm.DnnlMatMulEpilogue.build(_layer("MatMulEpilogue", 2), {}, CPU)([a, w])[0]
    torch.testing.assert_close(plain.double(), a.double() @ w.double(), rtol=1e-5, atol=2e-5)
    c = torch.randn(6, generator=g)
    gemm = dm.DnnlGemm.build(_layer("Gemm", 3, transB=1, beta=0.5), {}, CPU)
    for rows in (4, 9):                                       # two row counts: two primitives, one packed weight
        x = torch.randn(rows, 8, generator=g)
        torch.testing.assert_close(gemm([x, wt, c])[0].double(), x.double() @ w.double() + 0.5 * c.double(),
                                   rtol=1e-5, atol=2e-5)


def test_refusals_say_why(monkeypatch):
    sup, fits = dm.DnnlMatMulEpilogue.supports, dm.DnnlMatMulEpilogue.fits
    assert "CPU tactic" in sup(_layer("MatMulEpilogue", 2), torch.device("meta"))
    assert "scale" in sup(_layer("MatMulEpilogue", 2, scale=0.5), CPU)
    assert "PRelu" in sup(_layer("MatMulEpilogue", 2, activation="PRelu"), CPU)
    assert "batched" in fits(_layer("MatMulEpilogue", 2), {}, [torch.randn(2, 1, 4), torch.randn(2, 4, 5)])
    assert "float32" in fits(_layer("MatMulEpilogue", 2), {}, [torch.randn(1, 4).double(), torch.randn(4, 5).double()])
    assert "bias of 3 values" in fits(_layer("MatMulEpilogue", 3), {}, [torch.randn(1, 4), torch.randn(4, 5),
                                                                         torch.randn(3)])
    assert "not y's shape" in fits(_layer("MatMulEpilogue", 4), {}, [torch.randn(2, 4), torch.randn(4, 5), None,
                                                                      torch.randn(1, 5)])
    assert "transA" in dm.DnnlGemm.supports(_layer("Gemm", 2, transA=1), CPU)
    with pytest.raises(ValueError, match="cpu_dnnl got inputs"):
        dm.DnnlMatMulEpilogue.build(_layer("MatMulEpilogue", 2), {}, CPU)([torch.randn(2, 1, 4), torch.randn(2, 4, 5)])
    monkeypatch.setattr(onednn_capi, "_LIB", ["oneDNN's C library is not installed (pip install x)"])
    assert "pip install" in sup(_layer("MatMulEpilogue", 2), CPU)


def test_one_primitive_per_row_count_and_weight_packed_once():
    w, b = torch.randn(32, 16), torch.randn(16)
    run = dm.MatMulRunner(False, "Relu")
    start = onednn_capi.PACK_COUNT[0]
    for _ in range(3):
        run(torch.randn(5, 32), w, b)
    assert len(run.prims) == 1 and onednn_capi.PACK_COUNT[0] - start == 1
    run(torch.randn(64, 32), w, b)
    assert len(run.prims) == 2


def _mlp_model():
    rng = np.random.default_rng(0)

    def t(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.2).astype(np.float32), name)
    nodes = [helper.make_node("Gemm", ["x", "w0", "b0"], ["h0"], transB=1),
             helper.make_node("Relu", ["h0"], ["a0"]),
             helper.make_node("MatMul", ["a0", "w1"], ["h1"]), helper.make_node("Add", ["h1", "b1"], ["h2"]),
             helper.make_node("Tanh", ["h2"], ["y"])]
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [24, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [t("w0", 128, 64), t("b0", 128), t("w1", 128, 32), t("b1", 32)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def test_mlp_on_it_matches_onnxruntime_and_the_check_can_fail():
    model = _mlp_model()
    x = np.random.default_rng(1).standard_normal((24, 64)).astype(np.float32)
    data = from_bytes(tfg.build(model, device="cpu").serialize())
    linear = [la for la in data.layers if la.op in ("Gemm", "MatMulEpilogue")]
    assert len(linear) == 2
    for la in linear:                                  # the tactic id is data: run both layers on this tactic
        la.tactic = f"{la.op.lower()}.cpu_dnnl"
    want = ort_run(model, {"x": x})["y"]
    got = ExecutionContext(data, "cpu").run({"x": torch.from_numpy(x)})["y"].numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    w = linear[1].inputs[1]
    data.constants[w] = data.constants[w] * 1.01
    bad = ExecutionContext(data, "cpu").run({"x": torch.from_numpy(x)})["y"].numpy()
    assert not np.allclose(bad, want, rtol=1e-4, atol=1e-5)
