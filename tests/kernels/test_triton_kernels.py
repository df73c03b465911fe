"""Hand-written Triton kernels (LayerNorm, Softmax, GEMM with epilogue, flash attention) under TRITON_INTERPRET=1,
built directly (CPU builds never offer them), against the IR references on tiny shapes."""

import pytest
import torch

from tensorforge.ir import Layer, get_spec
from tensorforge.kernels import candidates
from tensorforge.kernels.triton_attention import attention
from tensorforge.kernels.triton_gemm import gemm_epilogue
from tensorforge.kernels.triton_layernorm import layernorm
from tensorforge.kernels.triton_softmax import softmax

SMALL_GEMM = {"BM": 16, "BN": 16, "BK": 16, "G": 2, "stages": 1, "warps": 1}
SMALL_ATT = {"BM": 16, "BN": 16, "warps": 1, "stages": 1}


def ref(op, *inputs, **attrs):
    out = get_spec(op).reference(*inputs, **attrs)
    return out[0] if isinstance(out, tuple) else out


@pytest.mark.parametrize("shape,axis,bias,block", [((3, 5, 33), -1, True, None), ((2, 4, 6), -2, False, None),
                                                   ((4, 40), -1, True, 16)])
def test_layernorm(shape, axis, bias, block):
    x = torch.randn(*shape) * 3 + 1
    norm = shape[axis % len(shape):]
    w, b = torch.randn(norm), (torch.randn(norm) if bias else None)
    got = layernorm(x, w, b, axis, 1e-5, warps=1, block=block)
    torch.testing.assert_close(got, ref("LayerNormalization", x, w, b, axis=axis, epsilon=1e-5), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [4, 8])
@pytest.mark.parametrize("bias", [True, False])
def test_layernorm_several_rows_per_program(rows, bias):
    x = torch.randn(2, 7, 12) * 2 - 1                 # 14 rows: the last program is partly masked
    w, b = torch.randn(12), (torch.randn(12) if bias else None)
    got = layernorm(x, w, b, -1, 1e-5, warps=1, rows=rows)
    torch.testing.assert_close(got, ref("LayerNormalization", x, w, b, axis=-1, epsilon=1e-5), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 8])
def test_layernorm_reads_a_transposed_input_in_place(rows):
    """ConvNeXt: LayerNorm over channels of Transpose(NCHW) — columns H·W apart — read without a copy."""
    x = (torch.randn(2, 12, 3, 5) * 2).permute(0, 2, 3, 1)          # (2, 3, 5, 12), channels strided by 15
    w, b = torch.randn(12), torch.randn(12)
    got = layernorm(x, w, b, -1, 1e-5, warps=1, rows=rows, strided=True)
    torch.testing.assert_close(got, ref("LayerNormalization", x, w, b, axis=-1, epsilon=1e-5), rtol=1e-5, atol=1e-5)
    assert got.is_contiguous()


@pytest.mark.parametrize("cfg", [{"rows": 1}, {"rows": 8}, {"rows": 8, "strided": 1}])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_layernorm_with_row_shift_is_add_layernorm_of_a_column_vector(cfg, dtype):
    """ConvNeXt's conv bias moved into the LayerNorm: LN(x + b), b one value per column, the sum rounded to x's
    dtype first — the AddLayerNormalization reference with a broadcast b, through the tactic triton_shift_rows."""
    from tensorforge.kernels.triton_add_layernorm import TritonAddLayerNorm, TritonShiftLayerNorm
    x = ((torch.randn(2, 12, 3, 5) * 2).permute(0, 2, 3, 1)).to(dtype)        # channels strided by 15
    shift, w, b = (torch.randn(12) * 3).to(dtype), torch.randn(12).to(dtype), torch.randn(12).to(dtype)
    layer = Layer("aln", "AddLayerNormalization", ["x", "s", "w", "b"], ["y", ""], {"axis": -1, "epsilon": 1e-5})
    assert TritonShiftLayerNorm.fits(layer, cfg, [x, shift, w, b]) is None
    assert "differ in shape" in TritonAddLayerNorm.fits(layer, cfg, [x, shift, w, b])
    got, absent = TritonShiftLayerNorm.build(layer, {"warps": 1, **cfg}, torch.device("cpu"))([x, shift, w, b])
    want = ref("AddLayerNormalization", x, shift, w, b, axis=-1, epsilon=1e-5)
    tol = 1e-5 if dtype == torch.float32 else 2e-3
    assert absent is None
    torch.testing.assert_close(got.float(), want.float(), rtol=tol, atol=tol)


def test_row_shift_tactic_reasons():
    from tensorforge.kernels.triton_add_layernorm import TritonShiftLayerNorm
    keeps_sum = Layer("aln", "AddLayerNormalization", ["x", "s", "w"], ["y", "sum"], {})
    assert "sum is read" in TritonShiftLayerNorm.supports(keeps_sum, torch.device("cuda"))
    x = torch.randn(4, 6)
    assert "not one value per column" in TritonShiftLayerNorm.fits(keeps_sum, {}, [x, torch.randn(4, 6)])
    with pytest.raises(ValueError, match="one value per column"):
        layernorm(x, torch.ones(6), None, -1, 1e-5, shift=torch.ones(5))


def test_layernorm_strided_rows_that_do_not_merge_are_copied_first():
    from tensorforge.kernels.triton_layernorm import _strided_rows
    x = torch.randn(2, 3, 4, 5, 6).permute(2, 0, 3, 1, 4)            # three row groups: no 2-level indexing
    assert _strided_rows(x) is None
    w = torch.randn(6)
    got = layernorm(x, w, None, -1, 1e-5, warps=1, rows=4, strided=True)
    torch.testing.assert_close(got, ref("LayerNormalization", x, w, None, axis=-1, epsilon=1e-5), rtol=1e-5, atol=1e-5)


def test_layernorm_half():
    x, w, b = torch.randn(4, 64).half() * 4, torch.randn(64).half(), torch.randn(64).half()
    got = layernorm(x, w, b, -1, 1e-5, warps=1)
    assert got.dtype == torch.float16
    want = ref("LayerNormalization", x.float(), w.float(), b.float(), axis=-1, epsilon=1e-5)
    torch.testing.assert_close(got.float(), want, rtol=2e-3, atol=4e-3)


@pytest.mark.parametrize("shape,axis,log,block", [((3, 37), -1, False, None), ((2, 5, 3), 1, False, None),
                                                  ((3, 50), -1, True, 16), ((4, 50), -1, False, 16)])
def test_softmax(shape, axis, log, block):
    x = torch.randn(*shape) * 5
    x.view(-1)[0] = -float("inf")
    got = softmax(x, axis, log=log, warps=1, block=block)
    want = torch.log_softmax(x, axis) if log else ref("Softmax", x, axis=axis)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_softmax_half_large_logits():
    x = (torch.randn(3, 64) * 2000).half()       # exp would overflow float16 without the float32 inside
    got = softmax(x, -1, warps=1)
    torch.testing.assert_close(got.float(), torch.softmax(x.float(), -1), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("act,alpha,beta", [("none", 0.0, 0.0), ("Relu", 0.0, 0.0), ("Gelu", 0.0, 0.0),
                                            ("Gelu", 1.0, 0.0), ("Clip", 0.0, 6.0), ("HardSwish", 0.0, 0.0),
                                            ("Silu", 0.0, 0.0), ("LeakyRelu", 0.1, 0.0), ("Sigmoid", 0.0, 0.0),
                                            ("Tanh", 0.0, 0.0), ("HardSigmoid", 0.2, 0.5), ("Elu", 1.0, 0.0)])
def test_gemm_activations(act, alpha, beta):
    a, b, bias = torch.randn(2, 9, 20), torch.randn(20, 24), torch.randn(24)
    got = gemm_epilogue(a, b, bias, activation=act, alpha=alpha, beta=beta, cfg=SMALL_GEMM)
    want = ref("MatMulEpilogue", a, b, bias, activation=act, alpha=alpha, beta=beta)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("res_first", [0, 1])
def test_gemm_transposed_weight_scale_and_residual(res_first):
    a, w, bias, r = torch.randn(7, 33), torch.randn(18, 33), torch.randn(1, 18), torch.randn(7, 18)
    got = gemm_epilogue(a, w, bias, r, trans_b=1, scale=0.5, activation="Relu", residual_first=res_first,
                        cfg=SMALL_GEMM)
    want = ref("MatMulEpilogue", a, w, bias, r, trans_b=1, scale=0.5, activation="Relu", residual_first=res_first)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_gemm_batched_broadcast_and_half():
    a, b = torch.randn(2, 3, 5, 16), torch.randn(3, 16, 17)
    torch.testing.assert_close(gemm_epilogue(a, b, cfg=SMALL_GEMM), a @ b, rtol=1e-5, atol=1e-5)
    ah, bh = a.half(), b.half()
    got = gemm_epilogue(ah, bh, cfg=SMALL_GEMM)
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.float(), ah.float() @ bh.float(), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("pick", [6, 7, 8])
def test_gemm_skinny_configs_one_row_long_k(pick):
    """The 16-row configs meant for batch-1 fully connected layers: M = 1, K not a multiple of BK, Sigmoid."""
    from tensorforge.kernels.triton_gemm import CONFIGS
    a, w, bias = torch.randn(1, 300), torch.randn(40, 300), torch.randn(40)
    got = gemm_epilogue(a, w, bias, trans_b=1, activation="Sigmoid", cfg=CONFIGS[pick])
    want = ref("MatMulEpilogue", a, w, bias, trans_b=1, activation="Sigmoid")
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mask_kind", ["none", "additive", "bool"])
def test_attention(mask_kind):
    q, k, v = torch.randn(2, 2, 5, 12), torch.randn(2, 2, 19, 12), torch.randn(2, 2, 19, 10)
    mask = None
    if mask_kind == "additive":
        mask = torch.zeros(2, 1, 1, 19)
        mask[0, ..., -3:] = -1e4
    elif mask_kind == "bool":
        mask = torch.rand(2, 2, 5, 19) > 0.3
        mask[..., 0] = True
    got = attention(q, k, v, mask, scale=0.3, cfg=SMALL_ATT)
    torch.testing.assert_close(got, ref("Attention", q, k, v, mask, scale=0.3), rtol=1e-5, atol=1e-5)
    # written in (B, S, H, D) memory: the transpose + head merge before the output projection is a view
    merged = got.transpose(1, 2).reshape(2, 5, 20)
    assert merged.data_ptr() == got.data_ptr() and merged.is_contiguous()


def test_attention_rank3_default_scale_and_half():
    q, k, v = torch.randn(3, 17, 16), torch.randn(3, 17, 16), torch.randn(3, 17, 16)
    torch.testing.assert_close(attention(q, k, v, cfg=SMALL_ATT), ref("Attention", q, k, v), rtol=1e-5, atol=1e-5)
    got = attention(q.half(), k.half(), v.half(), cfg=SMALL_ATT)
    torch.testing.assert_close(got.float(), ref("Attention", q, k, v), rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("op,attrs,name", [("LayerNormalization", {"axis": -1}, "triton_rowwise"),
                                           ("Softmax", {"axis": -1}, "triton_rowwise"),
                                           ("MatMulEpilogue", {}, "triton_gemm"), ("Attention", {}, "triton_flash")])
def test_triton_tactics_are_not_offered_on_cpu(op, attrs, name):
    layer = Layer("l", op, ["a", "b", "c"], ["y"], attrs)
    found, reasons = candidates(layer, torch.device("cpu"))
    assert name not in [t.name for t, _ in found] and "CUDA" in reasons[name]


def test_attention_fully_masked_row_with_nan_to_zero():
    q, k, v = torch.randn(1, 1, 4, 16), torch.randn(1, 1, 6, 16), torch.randn(1, 1, 6, 16)
    keep = torch.rand(1, 1, 4, 6) > 0.3
    keep[..., 0, :] = False
    keep[..., 1:, 0] = True
    got = attention(q, k, v, keep, cfg=SMALL_ATT, nan_to_zero=1)
    want = ref("Attention", q, k, v, keep, nan_to_zero=1)
    assert torch.all(got[..., 0, :] == 0)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert torch.isnan(attention(q, k, v, keep, cfg=SMALL_ATT)[..., 0, :]).all()     # without the guard: NaN


@pytest.mark.parametrize("trans_b", [0, 1])
def test_gemm_tactic_on_a_transposed_input(trans_b):
    """The Triton MatMulEpilogue tactic multiplies a transposed (S, B, K) view in memory order (no copy of a) and
    honours trans_b; the result equals the op's reference."""
    from tensorforge.ir import Layer
    from tensorforge.kernels.triton_gemm import TritonGemmEpilogue
    a = torch.randn(3, 4, 16).transpose(0, 1)
    w = torch.randn(8, 16) if trans_b else torch.randn(16, 8)
    ins = [a, w, torch.randn(8), torch.randn(4, 3, 8)]
    attrs = {"trans_b": trans_b, "activation": "Sigmoid", "residual_first": 1}
    layer = Layer("mm", "MatMulEpilogue", ["a", "w", "b", "r"], ["y"], attrs)
    y = TritonGemmEpilogue.build(layer, SMALL_GEMM, torch.device("cpu"))(ins)[0]
    torch.testing.assert_close(y, ref("MatMulEpilogue", *ins, **attrs), rtol=1e-4, atol=1e-4)
