"""A quantized GEMM between Reshape(−1, K) and Reshape(…, N) runs on the output's rows (passes/rules/qgemm_rows.py),
and the quantized GEMM kernels multiply a row-permuted x in its memory order (kernels/quant_gemm.py): ViT's
seq-first attention tail, Transpose(2, 0, 1, 3) → Reshape(L·B, E) → Q/DQ → Gemm → Reshape(L, B, N) →
Transpose(1, 0, 2), where the head merge copied every code. Oracles: onnxruntime with graph optimisations disabled
(every Q and DQ as written) for the engine; the op reference on a dense copy of x for the kernels (torch._int_mm on
the CPU, the Triton int8 kernel under TRITON_INTERPRET=1)."""

import numpy as np
import pytest
import torch

from fusion_helpers import build_logged, ops
from qdq_graphs import G, channel_scales, ort_exact
from tensorforge.ir import Layer, get_spec
from tensorforge.kernels import quant_int_mm, triton_int8_gemm

RNG = np.random.RandomState(11)
B, H, L, D = 2, 2, 5, 8
E, N = H * D, 12


def _seq_first_tail(out_shape=(L, B, N), in_shape=(L * B, E)):
    """q, k, v (B, H, L, D) → softmax(q·kᵀ/√D)·v → Transpose(2, 0, 1, 3) → Reshape(in_shape) → Q/DQ → Gemm(W, b)
    → Reshape(out_shape) → Transpose(1, 0, 2) when 3-D: torch's batch-first nn.MultiheadAttention output path."""
    g = G()
    q, k, v = (g.input(n, [B, H, L, D]) for n in "qkv")
    s = g.node("MatMul", [q, g.node("Transpose", [k], perm=[0, 1, 3, 2])])
    p = g.node("Softmax", [g.node("Mul", [s, g.const(np.array(D ** -0.5, np.float32))])], axis=-1)
    o = g.node("MatMul", [p, v])
    rows = g.node("Reshape", [g.node("Transpose", [o], perm=[2, 0, 1, 3]), g.const(np.array(in_shape, np.int64))])
    w = RNG.randn(N, E).astype(np.float32) * 0.3
    b = RNG.randn(N).astype(np.float32) * 0.1
    xs = 0.01
    y = g.node("Gemm", [g.qdq(rows, xs, 0, np.int8), g.weight(w, 0), g.bias(b, xs, channel_scales(w, 0))], transB=1)
    y = g.node("Reshape", [y, g.const(np.array(out_shape, np.int64))])
    if len(out_shape) == 3:
        y = g.node("Transpose", [y], perm=[1, 0, 2])
    g.output(y)
    return g.model()


def _check(model):
    feeds = {n: RNG.randn(B, H, L, D).astype(np.float32) for n in "qkv"}
    engine, log = build_logged(model)
    got, want = engine.run(dict(feeds)), ort_exact(model, feeds)
    for name, w in want.items():
        scale = np.abs(w).max()
        assert scale > 0.1                                           # not a constant output
        assert np.abs(got[name] - w).max() <= 1e-5 * scale, np.abs(got[name] - w).max()
    return engine, log


def test_the_head_merge_reshape_keeps_the_outputs_rows():
    engine, _ = _check(_seq_first_tail())
    gemm = next(la for la in engine.data.layers if la.op == "QuantizedMatMul")
    rows = next(la for la in engine.data.layers if gemm.inputs[0] in la.outputs)
    assert rows.op == "Reshape"
    assert engine.data.constants[rows.inputs[1]].tolist() == [L, B, E]      # (L, B, E): a view of the codes
    readers = [la.op for la in engine.data.layers if gemm.outputs[0] in la.inputs]
    assert readers == ["Transpose"]                                          # the second reshape is gone
    assert ops(engine).count("Reshape") == 1 and "AttentionQuantize" in ops(engine)


@pytest.mark.parametrize("out_shape,why", [((L, B, 3, 4), "does not keep the columns"),
                                           ((0, N), "has a 0")])
def test_reshapes_that_do_not_keep_the_rows_stay(out_shape, why):
    engine, log = _check(_seq_first_tail(out_shape=out_shape))
    assert ops(engine).count("Reshape") == 2
    assert why in log


def _permuted_codes():
    """(L, B, K) int8 codes laid out in (B, L, K) memory: a row-permuted view."""
    return torch.randint(-128, 128, (B, L, E), dtype=torch.int16).to(torch.int8).transpose(0, 1)


@pytest.mark.parametrize("y_dtype", ["float32", "int8"])
@pytest.mark.parametrize("triton_kernel", [False, True])
def test_a_row_permuted_x_is_multiplied_in_memory_order(y_dtype, triton_kernel):
    x, w = _permuted_codes(), torch.randint(-127, 128, (N, E), dtype=torch.int16).to(torch.int8)
    attrs = {"x_dtype": "int8", "x_scale": 0.02, "x_zero_point": -3, "w_scale": (torch.rand(N) * 0.01 + 1e-3).tolist(),
             "activation": "Relu", "y_dtype": y_dtype}
    if y_dtype == "int8":
        attrs.update(y_scale=0.05, y_zero_point=2)
    layer = Layer("q", "QuantizedMatMul", ["x", "w", "b"], ["y"], get_spec("QuantizedMatMul").resolve_attrs(attrs))
    bias = torch.randn(N) * 0.1
    want = get_spec("QuantizedMatMul").reference(x.contiguous(), w, bias, **layer.attrs)
    if triton_kernel:
        cfg = {"BM": 16, "BN": 16, "BK": 32, "G": 1, "stages": 1, "warps": 1}
        run = triton_int8_gemm.build_kernel(layer, cfg, torch.device("cpu"), interpret=True)
    else:
        run = quant_int_mm._IntMM.build(layer, None, torch.device("cpu"))
    got = run([x, w, bias])[0]
    assert got.shape == (L, B, N)
    assert got.transpose(0, 1).is_contiguous()          # rows in x's memory order: Transpose(1, 0, 2) is a view
    if y_dtype == "int8":
        assert torch.equal(got, want)
    else:
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)
